"""``curl`` lines, sent to the page's project in-process by Django's test client.

Supported: the URL (any host: the path and query are what count), ``-X/--request``,
``-H/--header``, ``-d/--data/--data-raw/--data-binary`` (joined with ``&`` as curl does),
``--json``, ``-u/--user``, ``-i/--include``, ``-f/--fail``, ``-s``, ``-S``, ``-L``. What
it prints is what curl prints: the body, after the status line and headers with ``-i``.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

from .errors import SnippetFailure

VALUE_OPTIONS = {
    "-X": "method",
    "--request": "method",
    "-H": "header",
    "--header": "header",
    "-d": "data",
    "--data": "data",
    "--data-raw": "data",
    "--data-binary": "data",
    "--data-ascii": "data",
    "--json": "json",
    "-u": "user",
    "--user": "user",
}
FLAGS = {
    "-s": None,
    "--silent": None,
    "-S": None,
    "--show-error": None,
    "-L": None,
    "--location": None,
    "-i": "include",
    "--include": "include",
    "-f": "fail",
    "--fail": "fail",
}


def parse(args: list[str], location: str) -> dict:
    """curl's options, as a dict: url, method, headers, data, user, include, fail."""
    request: dict = {"headers": [], "data": [], "url": None}
    words = list(args)
    while words:
        word = words.pop(0)
        if word in VALUE_OPTIONS:
            if not words:
                raise SnippetFailure(location, f"curl option {word} needs a value")
            key, value = VALUE_OPTIONS[word], words.pop(0)
            if key == "header":
                request["headers"].append(value)
            elif key in ("data", "json"):
                if value.startswith("@"):
                    raise SnippetFailure(location, f"curl {word} {value}: reading data from a file is not supported")
                request["data"].append(value)
                if key == "json":
                    request["headers"] += ["Content-Type: application/json", "Accept: application/json"]
            else:
                request[key] = value
        elif (
            word.startswith("-")
            and not word.startswith("--")
            and len(word) > 2
            and all(f"-{c}" in FLAGS for c in word[1:])
        ):
            words[:0] = [f"-{c}" for c in word[1:]]  # -sS, -si
        elif word in FLAGS:
            if FLAGS[word]:
                request[FLAGS[word]] = True
        elif word.startswith("-"):
            raise SnippetFailure(
                location,
                f"curl option {word} is not supported by the docs runner "
                "(it knows -X, -H, -d, --json, -u, -i, -f, -s, -S, -L)",
            )
        elif request["url"] is None:
            request["url"] = word
        else:
            raise SnippetFailure(location, f"curl is given a second URL, {word!r}")
    if not request["url"] or not request["url"].startswith(("http://", "https://")):
        raise SnippetFailure(location, "curl needs an http:// or https:// URL")
    return request


def run_curl(args: list[str], location: str) -> tuple[int, str]:
    """Send the request; curl's exit status (22 for an error status with -f) and output."""
    from django.test import Client

    request = parse(args, location)
    url = urlsplit(request["url"])
    headers: dict[str, str] = {}
    for header in request["headers"]:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    if request.get("user"):
        headers["Authorization"] = "Basic " + base64.b64encode(request["user"].encode()).decode()
    body = "&".join(request["data"])
    content_type = headers.pop("Content-Type", "application/x-www-form-urlencoded" if request["data"] else "")
    method = request.get("method") or ("POST" if request["data"] else "GET")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    response = Client(HTTP_HOST=url.netloc).generic(
        method, path, data=body.encode(), content_type=content_type, secure=url.scheme == "https", headers=headers
    )
    if request.get("fail") and response.status_code >= 400:
        return 22, f"curl: (22) The requested URL returned error: {response.status_code}\n"
    content = b"".join(response.streaming_content) if response.streaming else response.content
    output = content.decode("utf-8", errors="replace")
    if request.get("include"):
        head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        output = "\n".join(head) + "\n\n" + output
    return 0, output
