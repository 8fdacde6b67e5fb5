import datetime
import itertools

import pytest

from invoices.due import due_date


@pytest.mark.parametrize(
    "issued, months, due",
    [
        ((2024, 1, 31), 1, (2024, 2, 29)),
        ((2023, 1, 31), 1, (2023, 2, 28)),
        ((2024, 11, 15), 2, (2025, 1, 15)),
        ((2024, 12, 1), 12, (2025, 12, 1)),
        ((2024, 5, 31), 1, (2024, 6, 30)),
        ((2024, 3, 10), 0, (2024, 3, 10)),
    ],
)
def test_known(issued, months, due):
    assert due_date(datetime.date(*issued), months) == datetime.date(*due)


@pytest.mark.parametrize("year", range(1990, 2060))
def test_every_day_of_a_year(year):
    day = datetime.date(year, 1, 1)
    for offset, months in itertools.product(range(366), (1, 6, 13)):
        d = day + datetime.timedelta(days=offset)
        due = due_date(d, months)
        assert (due.year * 12 + due.month) - (d.year * 12 + d.month) == months
        assert due.day == d.day or due.day < d.day
