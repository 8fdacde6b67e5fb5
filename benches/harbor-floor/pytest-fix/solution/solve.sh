#!/bin/bash
t0=$(date +%s%N); trap 'echo $(( $(date +%s%N) - t0 )) > /logs/agent/solve-ns' EXIT
cat > invoices/due.py <<'PY'
import calendar
import datetime


def due_date(issued: datetime.date, months: int) -> datetime.date:
    """The same day `months` later, the month's last day when it has no such day."""
    index = issued.month - 1 + months
    year, month = issued.year + index // 12, index % 12 + 1
    day = min(issued.day, calendar.monthrange(year, month)[1])
    return issued.replace(year=year, month=month, day=day)
PY
# Check it as a developer would before handing it in: every day of twenty years, a year on.
PYTHONDONTWRITEBYTECODE=1 python3 - <<'PY'
import datetime
from invoices.due import due_date

day = datetime.date(2000, 1, 1)
for offset in range(366 * 20):
    d = day + datetime.timedelta(days=offset)
    for months in range(0, 25, 3):
        due = due_date(d, months)
        assert (due.year * 12 + due.month) - (d.year * 12 + d.month) == months, (d, months, due)
        assert due.day <= d.day
print("checked")
PY
