"""How the reports write numbers, shared by every table and message of the analysis."""
from __future__ import annotations


def fmt(value: float, signed: bool = False) -> str:
    """Compact numbers: integers exactly (bytes), everything else to four significant digits."""
    if float(value).is_integer() and abs(value) < 1e12:
        text = f"{int(value):d}"
        return f"+{text}" if signed and value > 0 else text
    return f"{value:+.4g}" if signed else f"{value:.4g}"
