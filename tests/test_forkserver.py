"""The fork server (tests/forkserver.py) that runs code blocks and scripts: one per environment,
kept across tests, and its children see the environment a reader's interpreter would."""

import json

from conftest import run_reader_code


def test_one_fork_server_serves_every_test_and_its_children_see_no_test_name(tmp_path, monkeypatch):
    code = "import json, os\nprint(json.dumps([os.environ.get('PYTEST_CURRENT_TEST'), os.getppid()]))\n"
    first = run_reader_code(["-c", code], code, tmp_path)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_other.py::test_next (call)")  # pytest's own, per test
    second = run_reader_code(["-c", code], code, tmp_path)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    (name1, server1), (name2, server2) = (json.loads(p.stdout) for p in (first, second))
    assert name1 is None and name2 is None, f"a child saw pytest's name of the running test: {name1!r}, {name2!r}"
    assert server1 == server2, "the fork server was started again because pytest's test name changed"


def test_a_child_that_compiles_finds_the_cpus_vector_sets_already_probed(tmp_path):
    code = "from torch._inductor import cpu_vec_isa\nprint(cpu_vec_isa.valid_vec_isa_list.cache_info().currsize)\n"
    proc = run_reader_code(["-c", code], code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1", "the child would probe the CPU's vector instruction sets itself"
