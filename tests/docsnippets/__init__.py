"""The docs' snippet runner: every ```python and ```console block of a page, run in order.

Every block of the docs is run by the tests or says, by its language, why it cannot be; each
module below states the part of those rules it implements:

- ``blocks``: finds a page's code blocks (with Sybil's Markdown fence lexer) and sorts them into
  run (``python``, ``console``), not run (``bash``, ``text``, ``json``...) and refused (no
  language, or one the rules do not know);
- ``page``: one page's run: its namespace, its throwaway project (settings, URLconf, modules),
  its shell variables; ``run_page()`` is the entry point;
- ``python``: ``python`` blocks, including ``# settings.py``, ``# urls.py`` and ``# pkg/mod.py``;
- ``settings_check``: a settings snippet's app settings, validated by the app's own checks;
- ``console`` and ``shell``: ``console`` transcripts, their ``python manage.py`` and ``curl``
  lines run in-process, their output compared with ``...`` as a wildcard;
- ``collect``: pytest collection of the pages, one item per page and engine.
"""

from .errors import SnippetFailure
from .page import run_page

__all__ = ["SnippetFailure", "run_page"]
