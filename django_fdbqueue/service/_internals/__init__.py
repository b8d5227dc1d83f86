"""The service's private level: the layer's parts, which only ``service/`` imports.

The public operations one level up call these; the other packages reach what they need through
``service.extension`` instead, so these modules can change without breaking them (a test checks
the names imported). What each module holds is in the code map (docs/explanation/code-map.md);
the key layout they share is in ``keys`` and on the data model page.
"""
