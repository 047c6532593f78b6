"""Reading text files one way everywhere: UTF-8, a leading byte-order mark dropped, undecodable bytes refused.

Every text file initlab reads -- evaluation and training data (MS MARCO TSV, BEIR jsonl/tsv, TREC qrels, LRA
ListOps/AAN TSV, IMDB reviews, Pathfinder metadata), ``mlmhead inspect --texts``, configs, and the JSON, CSV
and markdown files initlab writes and reads back -- goes through this module, so that:

* the encoding is UTF-8 on every machine (never the locale's default, which is cp1252 on many Windows set-ups);
* a UTF-8 byte-order mark (``EF BB BF``, written by some Windows editors and spreadsheet exports) at the
  start of a file is dropped, instead of becoming part of the first id (``"\\ufeff0"`` is not ``"0"``, so
  the first query or document would silently lose its judgements) or of the first header cell;
* a file that is not UTF-8 raises :class:`TextDecodeError` (a ``ValueError``) naming the file, the line and
  the byte offset, instead of a bare ``UnicodeDecodeError`` without a file name; a UTF-16 or UTF-32 file
  (recognised by its byte-order mark) is named as such.

A gzip-compressed file (recognised by its first two bytes, ``1F 8B``, whatever its name) is read decompressed, and
:func:`text_file` lets a reader that looks for ``NAME`` in a folder find ``NAME.gz`` too: corpora are often shipped
compressed (``corpus.jsonl.gz``), and reading one as text gave "not UTF-8 ... use iconv", which points the wrong way.

Line splitting is Python's text mode (``\\n``, ``\\r\\n`` and ``\\r`` end a line; ``newline=""`` keeps the
endings for :mod:`csv`). A byte-order mark anywhere but at the very start is kept (it is then data).
Layer 1: imports nothing from initlab.
"""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path
from typing import Any, Iterator

__all__ = ["ENCODING", "TextDecodeError", "JSONFileError", "decode_text", "read_text", "read_json", "open_text",
           "integer_field", "text_field", "id_field", "text_file", "GZIP_MAGIC"]

#: the codec of every text file initlab reads: UTF-8 with an optional leading byte-order mark.
ENCODING = "utf-8-sig"

_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


#: the first two bytes of every gzip file (RFC 1952)
GZIP_MAGIC = b"\x1f\x8b"


def text_file(path: str | Path) -> Path:
    """``path``, or ``path`` + ``.gz`` when only that exists (a folder reader's file lookup); ``path`` when neither
    does, so a not-found error names the file the layout expects."""
    path = Path(path)
    if not path.exists():
        gz = path.with_name(path.name + ".gz")
        if gz.is_file():
            return gz
    return path


def _gunzip(data: bytes, source: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError; a truncated stream an EOFError
        raise TextDecodeError(f"{source}: starts like a gzip file but could not be decompressed ({err or 'truncated'})"
                              ) from None


class TextDecodeError(ValueError):
    """A file initlab reads as text is not UTF-8. The message names the file, the line and the byte offset."""


def _other_bom(head: bytes, source: str) -> TextDecodeError | None:
    for bom, name in _OTHER_BOMS:  # UTF-32 LE first: its mark starts with the UTF-16 LE one
        if head.startswith(bom):
            return TextDecodeError(f"{source}: the file is {name} (it starts with a {name} byte-order mark); "
                                   "initlab reads text files as UTF-8: save it as UTF-8")
    return None


def _decode_error(source: str, data: bytes, err: UnicodeDecodeError, base_offset: int = 0, base_line: int = 1,
                  note: str = "") -> TextDecodeError:
    start = err.start
    line = base_line + data.count(b"\n", 0, start)
    bad = data[start:start + 1].hex()
    return TextDecodeError(f"{source}:{line}: not UTF-8 text (byte 0x{bad} at byte offset {base_offset + start}{note}: "
                           f"{err.reason}); initlab reads text files as UTF-8: convert the file, e.g. "
                           f"'iconv -f <its encoding> -t UTF-8'")


def decode_text(data: bytes, source: str | Path) -> str:
    """``data`` decoded as UTF-8, a leading byte-order mark dropped; gzip-compressed ``data`` is decompressed first.

    Args:
        data: the raw bytes of a file (or of a packaged resource).
        source: the file name used in error messages.
    Raises:
        TextDecodeError: ``data`` is not UTF-8 (the message names ``source``, the line and the byte offset),
            or starts with a UTF-16/UTF-32 byte-order mark.
    """
    source = str(source)
    if data.startswith(GZIP_MAGIC):
        data = _gunzip(data, source)
        source_note = " (of the decompressed gzip content)"
    else:
        source_note = ""
    other = _other_bom(data[:4], source)
    if other is not None:
        raise other
    shift = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    body = data[shift:]
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _decode_error(source, body, err, base_offset=shift, note=source_note) from None


def read_text(path: str | Path) -> str:
    """The text of the file ``path`` (UTF-8, a leading byte-order mark dropped).

    Raises:
        FileNotFoundError: ``path`` does not exist. TextDecodeError: not UTF-8 (see :func:`decode_text`).
    """
    path = Path(path)
    return decode_text(path.read_bytes(), path)


def integer_field(value: Any, where: str, what: str, *, hint: str = "", error: type[ValueError] = ValueError) -> int:
    """``value`` (a field of a text file, or a number from a dataset library) as an integer, never truncated.

    The one rule for integer fields (qrels grades, class labels): ``"1"``, ``1`` and an integer written with a
    decimal point (``"1.0"``, ``1.0``) are 1; a fractional value (``"0.5"``, ``1.5``), a non-finite one, a bool or
    text that is not a number is refused (``int(float("1.5"))`` would silently read 1).

    Args:
        value: the field (str, int, float or a numpy scalar).
        where: the file and line (``"path:3"``) or the record, named in the error.
        what: the field's name in the error (``"relevance grade"``, ``"label"``).
        hint: appended to the error (why the field is an integer).
        error: the exception class raised (a ``ValueError`` subclass).
    Raises:
        ``error``: one line ``WHERE: WHAT 'VALUE' is a fractional value`` (or ``is not an integer``).
    """
    import math

    number = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        return int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = None
    else:
        try:  # float, numpy scalars
            number = float(value)
        except (TypeError, ValueError):
            number = None
    if number is not None and math.isfinite(number) and number.is_integer():
        return int(number)
    kind = "a fractional value" if number is not None and math.isfinite(number) else "not an integer"
    raise error(f"{where}: {what} {value!r} is {kind}; expected an integer{hint} (initlab neither truncates nor "
                "rounds it)")


def _json_kind(value: Any) -> str:
    """How a non-string field reads in an error: ``null``, ``the number 1984``, ``a list``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return f"a {'list' if isinstance(value, (list, tuple)) else 'object' if isinstance(value, dict) else type(value).__name__}"


def text_field(value: Any, where: str, what: str, *, error: type[ValueError] = ValueError) -> str:
    """``value`` (a text field of a record read from a user's file or a dataset library) when it is a string.

    The one rule for text fields (a BEIR document's ``text`` and ``title``, a query's ``text``, a review): a text is
    a string. ``null`` is never read as ``"None"`` (a document ``{"title": "apple", "text": null}`` would become
    ``"apple None"`` and match the query "none"), and a number is never turned into text silently.

    Args:
        value: the field as the file holds it (after JSON decoding).
        where: the file and line (``"path:3"``) or the record, named in the error.
        what: the field's name (``"text"``, ``"title"``).
        error: the exception class raised (a ``ValueError`` subclass).
    Raises:
        ``error``: one line ``WHERE: field 'WHAT' is null; expected a string ...``.
    """
    if isinstance(value, str):
        return value
    raise error(f"{where}: field {what!r} is {_json_kind(value)}; expected a string (a text field holds text: write "
                f"\"{what}\": \"...\", or \"\" for no text)")


def id_field(value: Any, where: str, what: str, *, error: type[ValueError] = ValueError) -> str:
    """``value`` (an id field: a BEIR ``_id``) as the string the qrels name it by: a string as it is, an integer
    written in JSON as a number (``7``) as ``"7"``.

    Raises:
        ``error``: the id is null, a bool, a fractional or non-integer number, a list or an object (``null`` would
            otherwise become the id ``"None"``, ``7.0`` the id ``"7.0"`` that no qrels line names).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise error(f"{where}: field {what!r} is {_json_kind(value)}; expected a string or an integer id")


class JSONFileError(json.JSONDecodeError):
    """A file that is not valid JSON; the message names the file (a ``json.JSONDecodeError``, so a ``ValueError``)."""

    def __init__(self, path: str | Path, err: json.JSONDecodeError):
        super().__init__(f"{path}: not valid JSON ({err.msg})", err.doc, err.pos)
        self.path = str(path)

    def __reduce__(self):
        return (_json_file_error, (self.path, self.msg, self.doc, self.pos))

    def __str__(self) -> str:
        return f"{self.msg} at line {self.lineno} column {self.colno}"


def _json_file_error(path: str, msg: str, doc: str, pos: int) -> JSONFileError:
    err = JSONFileError.__new__(JSONFileError)
    json.JSONDecodeError.__init__(err, msg, doc, pos)
    err.path = path
    return err


def read_json(path: str | Path) -> Any:
    """The JSON value in the file ``path``, read with :func:`read_text`.

    Raises:
        FileNotFoundError, TextDecodeError: as :func:`read_text`. JSONFileError (a ``json.JSONDecodeError``):
            not JSON; the message names the file, line and column (one line for the commands to print).
    """
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise JSONFileError(path, err) from None


class open_text:
    """Open ``path`` for reading text line by line (large files), decoded as :func:`read_text` decodes.

    Use as ``with open_text(path) as fh: for line in fh: ...``; ``fh`` iterates over lines and has
    ``read()``; pass ``newline=""`` for :mod:`csv`. A leading UTF-8 byte-order mark is dropped. On bytes
    that are not UTF-8 the file is scanned once more to name the exact line and byte offset.

    Raises:
        FileNotFoundError: ``path`` does not exist. TextDecodeError: not UTF-8 (raised while reading,
            from the line where the bad bytes are, or at opening for a UTF-16/UTF-32 byte-order mark).
    """

    def __init__(self, path: str | Path, *, newline: str | None = None):
        self.path = Path(path)
        with open(self.path, "rb") as raw:
            self.gzipped = raw.read(2) == GZIP_MAGIC
        with self._open_binary() as raw:
            try:
                head = raw.read(4)
            except (OSError, EOFError) as err:
                raise TextDecodeError(f"{self.path}: starts like a gzip file but could not be decompressed "
                                      f"({err or 'truncated'})") from None
            other = _other_bom(head, str(self.path))
        if other is not None:
            raise other
        if self.gzipped:
            self._fh = gzip.open(self.path, "rt", encoding=ENCODING, errors="strict", newline=newline)
        else:
            self._fh = open(self.path, encoding=ENCODING, errors="strict", newline=newline)

    def _open_binary(self):
        return gzip.open(self.path, "rb") if self.gzipped else open(self.path, "rb")

    def __enter__(self) -> "open_text":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._fh.close()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        try:
            return next(self._fh)
        except UnicodeDecodeError:
            raise self._locate() from None
        except (OSError, EOFError) as err:  # a corrupt or truncated gzip stream
            raise TextDecodeError(f"{self.path}: gzip file could not be decompressed ({err or 'truncated'})") from None

    def read(self) -> str:
        try:
            return self._fh.read()
        except UnicodeDecodeError:
            raise self._locate() from None
        except (OSError, EOFError) as err:
            raise TextDecodeError(f"{self.path}: gzip file could not be decompressed ({err or 'truncated'})") from None

    def _locate(self) -> TextDecodeError:
        """Find the first undecodable line by reading the file again in binary (error path only)."""
        offset = 0
        note = " (of the decompressed gzip content)" if self.gzipped else ""
        with self._open_binary() as raw:
            for lineno, line in enumerate(raw, 1):  # b"\n" never occurs inside a UTF-8 multi-byte sequence
                chunk = line[3:] if lineno == 1 and line.startswith(codecs.BOM_UTF8) else line
                try:
                    chunk.decode("utf-8")
                except UnicodeDecodeError as err:
                    shift = len(line) - len(chunk)
                    return _decode_error(str(self.path), chunk, err, base_offset=offset + shift, base_line=lineno,
                                         note=note)
                offset += len(line)
        # an incomplete multi-byte sequence at the very end of the file
        return TextDecodeError(f"{self.path}: not UTF-8 text (truncated multi-byte sequence at the end); "
                               "initlab reads text files as UTF-8: convert the file")
