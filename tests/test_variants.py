"""Per-student variants (issue 44): a master's ``# VARIANT`` cell drawn per student, the
notebooks and bundle a per-student release writes, and grading by the hand-in's variant:
copied numbers earn 0, edited or borrowed variants are flagged, the gradebook says which
variant each student was graded on. The master is tests/data/grading/variant.ipynb."""
import copy
import csv
import json
from pathlib import Path

import pytest

from d2lattn.grading import grade, release
from d2lattn.grading.master.notebook import cell_source
from d2lattn.grading.master.variant import (cell_params, fill, parameters, stated,
                                            student_source, variant_index, with_params)
from d2lattn.grading.releasing.per_student import (ClassRelease, digest, draw, folder_of,
                                                   read_secret, variant_key)
from d2lattn.grading.releasing.split import master_params, split_master
from d2lattn.grading.variants import Draws
from grading_support import require_sandbox

MASTER = Path(__file__).parent / "data" / "grading" / "variant.ipynb"
ROSTER = "name,email,login\nAda Lovelace,ada@uni.edu,ada\nAlan Turing,alan@uni.edu,alan\n" \
         "Grace Hopper,grace@uni.edu,grace\n"
SECRET = b"a course secret of forty bytes, for tests"
CELL = ("# VARIANT\nfrom d2lattn.grading.variants import choice, randint, uniform\n"
        "heads = choice([4, 8, 16])\nwidth = randint(16, 64)\nd = heads * width\n"
        "rate = uniform(0.1, 0.9, digits=3)\nname = choice(['relu', 'gelu'])\n"
        "sizes = (heads, width)")


def master():
    return json.loads(MASTER.read_text(encoding="utf-8"))


# --- the variant cell ------------------------------------------------------------------

def test_the_masters_own_variant_takes_each_draws_default():
    assert parameters(CELL) == {"heads": 4, "width": 16, "d": 64, "rate": 0.1,
                                "name": "relu", "sizes": (4, 16)}


def test_a_seed_draws_every_parameter_from_its_range_and_derived_ones_follow():
    drawn = [parameters(CELL, seed) for seed in range(200)]
    assert {p["heads"] for p in drawn} == {4, 8, 16}
    assert {p["name"] for p in drawn} == {"relu", "gelu"}
    widths = [p["width"] for p in drawn]
    assert min(widths) == 16 and max(widths) == 64  # both ends included
    assert all(0.1 <= p["rate"] <= 0.9 and round(p["rate"], 3) == p["rate"] for p in drawn)
    assert all(p["d"] == p["heads"] * p["width"] and p["sizes"] == (p["heads"], p["width"])
               for p in drawn)
    assert parameters(CELL, 7) == parameters(CELL, 7) != parameters(CELL, 8)


@pytest.mark.parametrize("line, error", [
    ("import os", "assignments `name = expression` only"),
    ("x = __import__('os')", "failed"),
    ("x = open('/etc/passwd')", "failed"),
    ("x = [1, 2].__class__", "must be a number"),
    ("x = float('nan')", "must be a number"),
    ("x = 1\nx = 2", "assigned twice"),
    ("x, y = 1, 2", "assignments `name = expression` only"),
    ("choice = 3", "hides a draw"),
    ("x = randint(5, 1)", "low <= high"),
    ("x = choice([])", "non-empty"),
])
def test_a_variant_cell_holds_only_draws_and_literal_parameters(line, error):
    with pytest.raises(ValueError, match=error):
        parameters("# VARIANT\nfrom d2lattn.grading.variants import choice, randint\n" + line,
                   3, "ch1, cell 4")
    with pytest.raises(ValueError, match="without a parameter"):
        parameters("# VARIANT\nfrom d2lattn.grading.variants import choice", None)


def test_draws_refuse_bad_arguments():
    with pytest.raises(TypeError, match="seed"):
        Draws("7")
    with pytest.raises(ValueError, match="digits"):
        Draws(1).uniform(0, 1, digits=9)
    with pytest.raises(ValueError, match="low < high"):
        Draws(1).uniform(1.0, 1.0)


def test_the_student_cell_states_the_values_as_literals_read_back_exactly():
    params = parameters(CELL, 11)
    source = student_source(params)
    assert source.startswith("# VARIANT: your own numbers") and stated(source) == params
    assert stated(source + "\nimport os") is None  # not only literal assignments
    assert stated("x = (") is None


def test_markdown_fields_take_the_values_and_a_stray_field_is_refused():
    text = fill("Use {{heads}} heads of width {{ width }}, {{name}}: {{sizes}}.",
                {"heads": 8, "width": 32, "name": "gelu", "sizes": (8, 32)}, "cell 3")
    assert text == "Use 8 heads of width 32, gelu: (8, 32)."
    with pytest.raises(ValueError, match=r"cell 3: \{\{depth\}\} names no parameter"):
        fill("{{depth}}", {"heads": 8}, "cell 3")


def test_a_notebook_gets_its_variant_cell_replaced_or_added():
    nb = master()
    index = variant_index(nb)
    replaced = with_params(nb, {"temperature": 8.0, "width": 5, "k": 9})
    assert cell_params(replaced) == {"temperature": 8.0, "width": 5, "k": 9}
    assert cell_source(nb["cells"][index]).startswith("# VARIANT\n")  # left as it was
    gone = dict(nb, cells=nb["cells"][:index] + nb["cells"][index + 1:])
    assert cell_params(gone) is None
    assert cell_params(with_params(gone, {"k": 4})) == {"k": 4}
    twice = dict(nb, cells=nb["cells"] + [nb["cells"][index]])
    with pytest.raises(ValueError, match="2 variant cells"):
        variant_index(twice, "ch1")


def test_the_plain_release_states_the_masters_own_variant():
    student, _ = split_master(master(), "variant")
    assert cell_params(student) == master_params(master(), "variant") == {
        "temperature": 2.0, "width": 3, "k": 3}
    text = json.dumps(student)
    assert "{{" not in text and "ln 3]" in text and "temperature being 2.0" in text


# --- keys, seeds and records ------------------------------------------------------------

def test_keys_seeds_and_digests_come_from_the_secret_only():
    one, other = SECRET, b"another secret of forty bytes, for test"
    assert variant_key(one, "ch1", "ada", None) == "ada"  # one variant per student
    keys = [variant_key(one, "ch1", f"s{i}", 5) for i in range(300)]
    assert set(keys) == {"1", "2", "3", "4", "5"}
    assert min(keys.count(k) for k in set(keys)) > 30  # spread over the variants
    assert keys[:50] != [variant_key(other, "ch1", f"s{i}", 5) for i in range(50)]
    source = cell_source(master()["cells"][variant_index(master())])
    ada, ada_again, alan = (draw(one, "ch1", key, source) for key in ("ada", "ada", "alan"))
    assert ada == ada_again and ada.params != alan.params and ada.salt != alan.salt
    assert draw(other, "ch1", "ada", source) != ada
    release_id = {"bundle": "0123456789ab"}
    signed = digest(one, "ch1", release_id, "ada", ada)
    assert len(signed) == 32 and signed == digest(one, "ch1", release_id, "ada", ada)
    assert signed != digest(one, "ch1", release_id, "alan", ada)  # another student
    assert signed != digest(other, "ch1", release_id, "ada", ada)


def test_a_class_release_refuses_a_weak_secret_a_bad_count_and_a_roster_twice(tmp_path):
    roster, secret = tmp_path / "roster.csv", tmp_path / "secret"
    roster.write_text(ROSTER)
    secret.write_bytes(b"short\n")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        read_secret(secret)
    with pytest.raises(ValueError, match="secret must be a readable file"):
        read_secret(tmp_path / "missing")
    secret.write_bytes(SECRET + b"\n")
    assert read_secret(secret) == SECRET
    with pytest.raises(ValueError, match="needs both roster and secret"):
        ClassRelease.read(roster, None)
    with pytest.raises(ValueError, match="variants must be a positive int"):
        ClassRelease.read(roster, secret, 0)
    (tmp_path / "twice.csv").write_text(ROSTER + "Ada L.,ada2@uni.edu,ada\n")
    with pytest.raises(ValueError, match=r"twice: \['ada'\]"):
        ClassRelease.read(tmp_path / "twice.csv", secret)
    (tmp_path / "clash.csv").write_text("name,login\nA,a/b\nB,a:b\n")
    with pytest.raises(ValueError, match="same folder name"):
        ClassRelease.read(tmp_path / "clash.csv", secret)
    assert folder_of("ada@uni.edu") == "ada@uni.edu" and folder_of("../x") == ".._x"


# --- release and grading ----------------------------------------------------------------

@pytest.fixture(scope="module")
def class_release(tmp_path_factory):
    """The variant master released to a class of three, each their own variant, with two
    drawn variants checked."""
    require_sandbox()
    folder = tmp_path_factory.mktemp("variants")
    (folder / "roster.csv").write_text(ROSTER)
    (folder / "secret").write_bytes(SECRET)
    paths = release(MASTER, folder / "rel", seeds=2, roster=folder / "roster.csv",
                    secret=folder / "secret")
    return folder, paths


def released(folder, student):
    return json.loads((folder / "rel" / "students" / student / "variant.ipynb").read_text())


def test_each_student_gets_their_own_notebook_numbers_and_record(class_release):
    folder, paths = class_release
    ada, alan = released(folder, "ada"), released(folder, "alan")
    assert [p.relative_to(folder / "rel").as_posix() for p in paths] == [
        "variant.ipynb", "students/ada/variant.ipynb", "students/alan/variant.ipynb",
        "students/grace/variant.ipynb"]
    with open(folder / "rel" / "students" / "index.csv", newline="") as table:
        index = list(csv.DictReader(table))
    assert [(r["student"], r["email"], r["variant"]) for r in index] == [
        ("ada", "ada@uni.edu", "ada"), ("alan", "alan@uni.edu", "alan"),
        ("grace", "grace@uni.edu", "grace")]
    records = [nb["metadata"]["d2lattn"]["variant"] for nb in (ada, alan)]
    assert [r["student"] for r in records] == ["ada", "alan"]
    assert records[0]["params"] != records[1]["params"]
    assert [cell_params(nb) for nb in (ada, alan)] == [
        parameters(student_source(r["params"])) for r in records]
    k = records[0]["params"]["k"]
    texts = [json.dumps(nb["cells"]) for nb in (ada, alan)]
    assert f"ln {k}]" in texts[0] and f"ln {k}]" not in texts[1]
    # the rest of the notebook is the plain release's, byte for byte
    plain = json.loads((folder / "rel" / "variant.ipynb").read_text())
    differ = [i for i, (a, b) in enumerate(zip(ada["cells"], plain["cells"])) if a != b]
    assert len(ada["cells"]) == len(plain["cells"]) and len(differ) == 3  # cell, 2 texts
    assert "variant" not in plain["metadata"]["d2lattn"]


def test_the_bundle_holds_each_variants_inputs_and_expected_values(class_release):
    folder, _ = class_release
    bundle = json.loads((folder / "rel" / "autograder" / "variant.json").read_text())
    assert bundle["params"] == {"temperature": 2.0, "width": 3, "k": 3}
    assert set(bundle["variants"]) == set(bundle["students"]) == {"ada", "alan", "grace"}
    hidden = {key: [case for test in v["tests"] for case in test["suites"][0]["cases"]
                    if case["hidden"]] for key, v in bundle["variants"].items()}
    inputs = {key: [case["call"] for case in cases] for key, cases in hidden.items()}
    expected = {key: [case["expected"] for case in cases] for key, cases in hidden.items()}
    assert inputs["ada"] != inputs["alan"] != inputs["grace"]  # the hidden inputs differ
    assert expected["ada"] != expected["alan"]
    for key, variant in bundle["variants"].items():
        k = variant["params"]["k"]
        assert expected[key][1] == [{"t": "num", "v": k / (1 + k)}]
        assert variant["cell"] == student_source(parameters(variant["cell"]))
        assert bundle["students"][key]["digest"] == \
            released(folder, key)["metadata"]["d2lattn"]["variant"]["digest"]


def answered(folder, student, numbers_of=None):
    """The master's answers in ``student``'s released notebook (its record and variant);
    with ``numbers_of``, the numeric answer is that classmate's, copied as a number."""
    own = released(folder, student)
    nb = with_params(master(), cell_params(own))
    nb = copy.deepcopy(dict(nb, metadata=own["metadata"]))
    if numbers_of is not None:
        k = released(folder, numbers_of)["metadata"]["d2lattn"]["variant"]["params"]["k"]
        cell = next(c for c in nb["cells"] if "answer_q2 =" in cell_source(c))
        cell["source"] = f"# QUESTION q2_weight points=1\nanswer_q2 = {k / (1 + k)!r}"
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                        "execution_count": None,
                        "source": f'# STUDENT\nname = ""\nemail = "{student}@uni.edu"'})
    return nb


@pytest.fixture(scope="module")
def class_grades(class_release):
    """Two rounds of hand-ins graded: Ada's own answers, Alan's with Ada's number copied in,
    Grace's with its record's digest edited; then Ada handing in Alan's notebook, Alan with
    his variant cell edited, and Zoe, who is not on the roster."""
    folder, _ = class_release
    subs = folder / "subs"
    subs.mkdir()
    notebooks = {"ada": answered(folder, "ada"), "alan": answered(folder, "alan", "ada")}
    grace = answered(folder, "grace")
    grace["metadata"]["d2lattn"]["variant"]["digest"] = "0" * 32
    notebooks["grace"] = grace
    for name, nb in notebooks.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(nb))
    grade(subs, folder / "rel" / "autograder", folder / "grades",
          roster=folder / "roster.csv", progress=False)
    # a second round: Ada re-hands in Alan's notebook under her name; Alan edits his cell
    later = folder / "later"
    later.mkdir()
    (later / "ada.ipynb").write_text(json.dumps(answered(folder, "alan")))
    edited = answered(folder, "alan")
    index = variant_index(edited)
    edited["cells"][index]["source"] = cell_source(edited["cells"][index]).replace(
        "k = ", "k = 1 + ")
    (later / "alan.ipynb").write_text(json.dumps(edited))
    zoe = answered(folder, "grace")
    zoe["cells"][-1]["source"] = '# STUDENT\nname = "Zoe"\nemail = "zoe@uni.edu"'
    (later / "zoe.ipynb").write_text(json.dumps(zoe))
    grade(later, folder / "rel" / "autograder", folder / "later-grades",
          roster=folder / "roster.csv", progress=False)
    return folder


def book(path):
    with open(path, newline="") as table:
        return {row["student"]: row for row in csv.DictReader(table)}


def test_own_answers_earn_full_marks_and_a_copied_number_earns_0(class_grades):
    rows = book(class_grades / "grades" / "gradebook.csv")
    assert (rows["ada"]["total"], rows["ada"]["status"], rows["ada"]["variant"]) == \
        ("3", "graded", "ada")
    assert (rows["alan"]["q1_tempered"], rows["alan"]["q2_weight"], rows["alan"]["status"]) \
        == ("2", "0", "graded")  # the same code passes; Ada's number does not
    assert rows["alan"]["variant"] == "alan"


def test_an_edited_record_is_flagged_and_exported_blank(class_grades):
    rows = book(class_grades / "grades" / "gradebook.csv")
    assert rows["grace"]["status"] == "edited variant"
    assert "does not match the release's digest" in rows["grace"]["note"]
    assert rows["grace"]["total"] == "3"  # graded on her own variant all the same
    with open(class_grades / "grades" / "moodle.csv", newline="") as table:
        moodle = {row["Username"]: row for row in csv.DictReader(table)}
    grade_column = "variant"  # the assignment's name: the master's file name
    assert (moodle["grace"][grade_column], moodle["ada"][grade_column]) == ("", "3")


def test_another_students_variant_an_edited_cell_and_no_variant_are_flagged(class_grades):
    rows = book(class_grades / "later-grades" / "gradebook.csv")
    assert "other variant" in rows["ada"]["status"].split("; ")
    assert "released to 'alan', not to ada" in rows["ada"]["note"]
    assert rows["ada"]["variant"] == "ada"  # graded on her own variant, not Alan's
    assert rows["alan"]["status"] == "edited variant"
    assert "# VARIANT cell was edited" in rows["alan"]["note"]
    assert rows["alan"]["total"] == "3"  # the grader ran his own numbers
    assert "no variant" in rows["zoe"]["status"] and rows["zoe"]["total"] == "0"
    assert "no variant for zoe" in rows["zoe"]["note"]


def test_check_runs_offline_on_the_students_own_numbers(class_release, monkeypatch, capsys):
    """Ada's notebook alone: its variant cell and registration cell run, then an answer that
    uses her temperature passes check() and one that keeps the master's own fails it."""
    from d2lattn.grading import student
    monkeypatch.setattr(student, "_TESTS", {})
    folder, _ = class_release
    nb = released(folder, "ada")
    env = {}
    for cell in nb["cells"]:
        text = cell_source(cell)
        if cell["cell_type"] == "code" and not text.startswith(("# QUESTION", "check(")):
            exec(text, env)  # imports, the variant cell, the registration cell, # STUDENT
    assert env["temperature"] == cell_params(nb)["temperature"] != 2.0
    answers = {"hers": "def tempered(X):\n    Z = np.asarray(X, float) / temperature\n"
                       "    return np.exp(Z) / np.exp(Z).sum(-1, keepdims=True)",
               "the master's": "def tempered(X):\n    Z = np.asarray(X, float) / 2.0\n"
                               "    return np.exp(Z) / np.exp(Z).sum(-1, keepdims=True)"}
    reports = {}
    for whose, source in answers.items():
        exec(source, env)
        env["check"]("q1_tempered", env)
        reports[whose] = capsys.readouterr().out
    assert "q1_tempered: 2 of 2 public cases passed" in reports["hers"]
    assert "1 of 2 public cases passed" in reports["the master's"]
    assert "case 2 FAILED: two scores one temperature apart" in reports["the master's"]
