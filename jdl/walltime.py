"""Walltimes as CiGri writes them: ``HH:MM:SS``, ``MM:SS``, or a number of seconds."""


def parse_walltime(value: str | int) -> int:
    """Return seconds; raise ValueError with a reason on anything else."""
    if isinstance(value, bool):
        raise ValueError(f"expected HH:MM:SS or seconds, got {value!r}")
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip()
        parts = text.split(":")
        if not text or len(parts) > 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"expected HH:MM:SS or seconds, got {value!r}")
        seconds = 0
        for part in parts:
            seconds = seconds * 60 + int(part)
    if seconds <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return seconds


def format_walltime(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
