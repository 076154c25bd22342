"""Points arithmetic: round half up to the rubric's decimals, and add rounded points without float noise."""
from decimal import ROUND_HALF_UP, Decimal


def round_points(value: float, decimals: int) -> float:
    """value rounded half up (2.675 -> 2.68), from its shortest decimal form, not its binary expansion."""
    value = float(value)
    if value.is_integer():  # most items: full points or none; skip the Decimal round trip
        return value
    return float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))


def add_points(values, decimals: int) -> float:
    """The exact decimal sum of already-rounded points, so a total always equals the sum of what is shown."""
    values = [float(v) for v in values]
    if all(v.is_integer() for v in values):
        return float(sum(values))
    total = sum((Decimal(repr(v)) for v in values), Decimal(0))
    return float(total.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))
