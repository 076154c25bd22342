"""File names from uploads: stored sanitised, and sent back in a Content-Disposition that no name can break."""
import unicodedata
from urllib.parse import quote

from flask import Response

MAX_NAME = 255  # the database column


def clean_filename(name: str | None, default: str) -> str:
    """The last path component without control or format characters (CR/LF, NUL, bidi overrides), at most 255."""
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    # Cc: CR, LF, NUL, ESC... (a header with CR/LF is refused by the server: every download answered 500);
    # Cf: right-to-left overrides that make "evil\u202eyp.exe" read as something else in a listing.
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp")).strip()
    if name in ("", ".", ".."):
        return default
    return name[-MAX_NAME:]


def content_disposition(name: str, disposition: str = "attachment") -> str:
    """RFC 6266: an ASCII fallback (quotes and backslashes escaped) and the exact name as filename*=UTF-8''."""
    name = clean_filename(name, "download")  # rows stored before names were cleaned may still hold CR/LF
    ascii_name = "".join(c if " " <= c < "\x7f" else "_" for c in name)
    ascii_name = ascii_name.replace("\\", "\\\\").replace('"', '\\"')
    return f"{disposition}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def submission_file(sub) -> Response:
    """A stored submission's file as a download (the API's, the student's and the instructor's)."""
    return Response(sub.content, mimetype="text/x-python",
                    headers={"Content-Disposition": content_disposition(sub.filename)})
