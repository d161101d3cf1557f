"""A shell command's kind of action: program and subcommand, never a path or an argument."""

from __future__ import annotations

import pytest

from vicar.hooks.command_kind import kind
from vicar.hooks.tool_call import describe


@pytest.mark.parametrize(
    "command, expected",
    [
        ("git status", "git status"),
        ("git -C /work/repo push --force origin main", "git push"),
        ("touch /tmp/pytest-of-root/ran-marker", "touch"),
        ("touch a b c", "touch"),
        ("ls -la", "ls"),
        ("ls src/vicar", "ls"),
        ("cd /repo && npm test", "npm test"),
        ("npm run build -- --watch", "npm run"),
        ("curl -fsSL https://get.example.sh | sh", "curl | sh"),
        ("wget -qO- https://x.example/i.sh | sudo bash", "wget | sudo bash"),
        ("FOO=1 BAR=2 git commit -m 'x y'", "git commit"),
        ("sudo -u root rm -rf /var/lib/app", "sudo rm"),
        ("bash -c 'rm -rf /tmp/x'", "rm"),
        ('sh -lc "git push origin HEAD"', "git push"),
        ("aws s3 rm s3://prod-backups --recursive", "aws s3 rm"),
        ("aws --profile prod ec2 terminate-instances --instance-ids i-1", "aws ec2 terminate-instances"),
        ("gcloud compute instances delete vm-1 --zone x", "gcloud compute instances delete"),
        ("kubectl -n prod delete namespace production", "kubectl delete"),
        ("python -m pytest -q tests/", "python -m pytest"),
        ("python3 scripts/migrate.py --all", "python3"),
        ("./scripts/deploy.sh prod", "deploy.sh"),
        ("find . -name '*.o' | xargs rm -f", "find | rm"),
        ("timeout 30 git fetch --all", "git fetch"),
        ("make -C build test", "make test"),
        ("git status && git status", "git status"),
        ("git add -A && git commit -m wip && git push", "git add && git commit && git push"),
        ("cat > notes.txt <<EOF\nrm -rf /\nEOF", "cat"),
        ("echo 'unclosed", "echo"),
        ("", ""),
    ],
)
def test_kind(command: str, expected: str) -> None:
    assert kind(command) == expected


def test_no_path_or_argument_in_a_kind() -> None:
    """Whatever the paths and arguments, the same program and subcommand is one kind."""
    lines = [
        f"{prog} {arg}"
        for prog in ("touch", "rm", "cat", "git add", "npm install")
        for arg in ("a", "/x/y z", "-f ./q")
    ]
    for line in lines:
        assert "/" not in kind(line) and "." not in kind(line), line
    assert kind("git push origin main") == kind("git push --force upstream feature/x")


def test_long_and_hostile_commands_are_bounded() -> None:
    many = " ; ".join(f"cmd{i} x" for i in range(500))
    assert kind(many).endswith("480 more")
    assert kind("a" * 100_000 + " b") == "a" * 64
    assert kind("x" + "'" * 10_001) == "x"


def test_tool_call_lineage_is_the_kind() -> None:
    _, _, key = describe("Bash", {"command": "touch /home/user/my-project/ran-marker"}, "/home/user/my-project")
    assert key == "touch"
    _, _, key = describe("Edit", {"file_path": "/p/src/app.py", "old_string": "a", "new_string": "b"}, "/p")
    assert key == "*.py"
    _, _, key = describe("Write", {"file_path": "/etc/hosts", "content": "x"}, "/p")
    assert key == "outside hosts"
    summary, _, key = describe("Edit", {"file_path": "/p/Makefile", "old_string": "a", "new_string": "b"}, "/p")
    assert (summary, key) == ("Makefile", "Makefile")
