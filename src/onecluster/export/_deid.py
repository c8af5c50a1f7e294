"""De-identify one file: pick its format, stream it, hash what is written, put it in place.

The output is written to a temporary file beside it (``.NAME.<random>.part``), hashed with
SHA-256 as it is written, fsync'd, and renamed over the output only once the whole input
has been read.  A refused or failed run removes the temporary file, so it leaves no output
at all — never a partial file that could be mistaken for a de-identified one — and an
existing output is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from onecluster.errors import NotFoundError, StorageError, ValidationError
from onecluster.export._csv import transform_csv
from onecluster.export._detect import DETECTOR_VERSION
from onecluster.export._jsonl import transform_jsonl
from onecluster.export._parquet import transform_parquet
from onecluster.export._profile import Profile
from onecluster.export._pseudonym import Pseudonymiser
from onecluster.export._report import DeidReport, freeze_counts
from onecluster.export._sink import HashingSink
from onecluster.export._transform import Transformer

__all__ = ["FORMATS", "deidentify", "format_of"]

#: File name endings and the format each means.
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def format_of(path: Path) -> str:
    """The format ``path``'s ending names; :class:`ValidationError` for any other."""
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        endings = ", ".join(FORMATS)
        msg = f"{path}: no format is known for the ending {path.suffix!r} (known: {endings})"
        raise ValidationError(msg)
    return found


def deidentify(
    source: Path, output: Path, *, key: bytes, profile: Profile | None = None
) -> DeidReport:
    """De-identify ``source`` into ``output`` (same format, by the file endings) with
    ``profile`` (default: every detector on every field) under ``key`` (≥ 16 bytes).

    Raises :class:`ValidationError` for a key too short, an unknown ending, an output of
    another format or the input itself; :class:`NotFoundError` for a missing input;
    :class:`ProfileError` and :class:`MalformedInputError` as the formats do;
    :class:`StorageError` when the output cannot be written.  Nothing is left at
    ``output`` unless the whole run succeeded.
    """
    pseudonymiser = Pseudonymiser(key)
    kind = format_of(source)
    if format_of(output) != kind:
        msg = f"the output {output} must be in the input's format ({kind}), like {source.name}"
        raise ValidationError(msg)
    if not source.is_file():
        msg = f"the input {source} does not exist or is not a file"
        raise NotFoundError(msg)
    if output.exists() and output.samefile(source):
        msg = f"the output {output} is the input: write the de-identified copy elsewhere"
        raise ValidationError(msg)
    profile = profile or Profile()
    transformer = Transformer(profile, pseudonymiser)
    try:
        handle, temporary = tempfile.mkstemp(
            dir=output.parent, prefix=f".{output.name}.", suffix=".part"
        )
    except OSError as exc:
        msg = f"cannot write beside {output}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    part = Path(temporary)
    try:
        with os.fdopen(handle, "wb") as file:
            sink = HashingSink(file)
            _run(kind, source, sink, transformer, name=source.name)
            file.flush()
            os.fsync(file.fileno())
        part.replace(output)
    except OSError as exc:
        part.unlink(missing_ok=True)
        msg = f"de-identifying {source} into {output} failed: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    detectors, fields = freeze_counts(transformer.tally)
    return DeidReport(
        source=str(source),
        output=str(output),
        format=kind,
        records=transformer.tally.records,
        bytes_in=source.stat().st_size,
        bytes_out=sink.size,
        sha256=sink.sha256.hexdigest(),
        key_id=pseudonymiser.key_id,
        profile_name=profile.name,
        profile_sha256=profile.sha256,
        detector_version=DETECTOR_VERSION,
        detectors=detectors,
        fields=fields,
        subjects=frozenset(transformer.tally.subjects),
        sensitive_subjects=frozenset(transformer.tally.sensitive_subjects),
    )


def _run(
    kind: str, source: Path, sink: HashingSink, transformer: Transformer, *, name: str
) -> None:
    if kind == "parquet":
        transform_parquet(source, sink, transformer, name=name)
        return
    with source.open("rb") as file:
        if kind == "jsonl":
            transform_jsonl(file, sink, transformer, name=name)
        else:
            delimiter = "\t" if kind == "tsv" else ","
            transform_csv(file, sink, transformer, name=name, delimiter=delimiter)
