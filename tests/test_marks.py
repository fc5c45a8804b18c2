"""Phase marks: written only when asked for, and read back as written."""

from archbench.core import marks


def test_marks_are_written_only_when_asked_and_read_back(monkeypatch, capsys):
    monkeypatch.delenv(marks.ENV, raising=False)
    marks.mark("window")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(marks.ENV, "1")
    marks.mark("warmup")
    marks.mark("window")
    written = marks.read_marks("other output\n" + capsys.readouterr().err)
    assert [m[0] for m in written] == ["warmup", "window"]
    (_, t0, pid, cpu0), (_, t1, _, cpu1) = written
    assert pid > 0 and t1 >= t0 and cpu1 >= cpu0 >= 0
