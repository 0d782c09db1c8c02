"""Memory sizes as Slurm's ``--mem`` writes them: a number of MiB, or a number with ``K``,
``M``, ``G`` or ``T`` (binary units)."""

_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


def parse_memory(value: str | int) -> int:
    """Return MiB (a partial MiB counts as one); raise ValueError with a reason otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 4G or 512M, got {value!r}")
    text = str(value).strip().upper()
    digits, unit = (text[:-1], text[-1]) if text[-1:] in _KIB else (text, "M")
    if not (digits.isascii() and digits.isdigit()):  # "²".isdigit() is true
        raise ValueError(f"expected a size such as 4G or 512M, got {value!r}")
    mebibytes = -(-int(digits) * _KIB[unit] // 1024)
    if mebibytes <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return mebibytes
