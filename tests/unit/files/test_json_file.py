import pytest

from ablate.evaluation.records import EvalFileError
from ablate.files.json_file import read_json


def test_reads_json_and_refuses_a_key_given_twice_naming_the_file_and_key(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text('{"steps": 10, "last": {"val/bleu": 3.0}}')
    assert read_json(path, "run summary") == {"steps": 10, "last": {"val/bleu": 3.0}}
    path.write_text('{"steps": 10, "last": {"val/bleu": 3.0, "val/bleu": 40.0}}')  # nested: the second would win
    with pytest.raises(ValueError, match=r"summary.json: not a valid run summary: duplicate key 'val/bleu'"):
        read_json(path, "run summary")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"steps": 10,\n "last": ', r"invalid JSON: Expecting value at line 2 column 10"),
        (b"\xff\xfe{}", "UnicodeDecodeError"),
        ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
    ],
)
def test_broken_file_is_the_callers_error_naming_the_file_and_place(tmp_path, text, message):
    path = tmp_path / "test.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(EvalFileError, match=message) as e:
        read_json(path, "evaluation file", EvalFileError)
    assert str(e.value).startswith(f"{path}: not a readable evaluation file")


def test_missing_file_names_it(tmp_path):
    with pytest.raises(ValueError, match=r"nope.json: not a readable run summary \(FileNotFoundError"):
        read_json(tmp_path / "nope.json", "run summary")
