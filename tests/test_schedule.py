"""How pytest -n splits the suite between its workers (tests/conftest.py): the units it starts
first are chapters or groups of files that exist, they come first, longest first, and a
notebook's cells and a file's tests keep their order."""
from types import SimpleNamespace

from conftest import LONGEST_FIRST, ROOT, TOGETHER, pytest_collection_modifyitems


def test_the_longest_units_are_chapters_or_groups_of_existing_files():
    chapters = {path.name for path in (ROOT / "book").glob("*.ipynb")}
    assert set(LONGEST_FIRST) <= chapters | set(TOGETHER.values())
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in TOGETHER if not (ROOT / "tests" / name).is_file()] == []


def test_the_longest_units_come_first_in_their_order_and_the_rest_as_collected():
    paths = ["tests/test_text.py", "book/07_bert.ipynb", "tests/test_pdf.py",
             "book/01_attention_pooling.ipynb", "book/07_bert.ipynb", "tests/test_book.py",
             "book/09_gpt.ipynb", "tests/test_metrics.py"]
    items = [SimpleNamespace(path=ROOT / path, number=number)
             for number, path in enumerate(paths)]
    pytest_collection_modifyitems(items)
    assert [item.number for item in items] == [6, 2, 5, 1, 4, 0, 3, 7]
