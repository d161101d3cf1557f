"""The kind of action a shell command is: each program it runs with its subcommand
(`git push`, `npm test`, `aws s3 rm`), never a path or an argument.

The proxy earns the right to answer alone per kind of action, and the person writes
rules per kind (`--lineage "bash:git push"`), so the kind must be what a person means
by "the same command": `touch a` and `touch b` are one kind, `git status` and
`git push` are two. A compound command is the kinds of its parts in order, with the
operator between them (`curl | sh`, `npm test && git push`): piping a download into a
shell is not the download. `cd` only moves the shell and is left out (`cd x && make
test` is `make test`); wrappers that run another command (`sudo`, `env`, `timeout 5`,
`bash -c '...'`) give the kind of the command they run, `sudo` kept in front.

Pure and linear in the command's length (shlex); the command is untrusted and bounded
by the caller.
"""

from __future__ import annotations

import os
import re
import shlex

# Programs whose second word is a subcommand (git push, kubectl delete), and those whose
# subcommand has a subcommand of its own (aws s3 rm, gcloud compute instances).
SUBCOMMANDS = frozenset(
    """
    git hg svn npm pnpm yarn bun deno npx cargo rustup go docker podman nerdctl kubectl
    oc helm kustomize terraform tofu pulumi pip pip3 pipx uv poetry conda mamba hatch
    apt apt-get dnf yum zypper pacman apk brew snap flatpak systemctl service journalctl
    launchctl gh glab make just task dotnet gradle mvn bundle gem rake rails mix composer
    php artisan heroku flyctl fly vercel netlify firebase supabase wrangler doctl eksctl
    minikube kind vagrant ansible-galaxy nix redis-cli git-lfs tmux screen crontab
    """.split()
)
LEVELS = {"aws": 2, "gsutil": 2, "doctl": 2, "gh": 2, "glab": 2, "gcloud": 3, "az": 3}
# Commands that run the command after their own options.
WRAPPERS = frozenset({"sudo", "doas", "env", "nice", "nohup", "time", "timeout", "command", "exec", "stdbuf", "xargs"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
# Global options that take a value before the subcommand (git -C dir push).
VALUE_OPTIONS = {
    "git": {"-C", "-c", "--git-dir", "--work-tree", "--namespace"},
    "docker": {"-H", "--host", "--context", "-c", "--config", "--log-level"},
    "kubectl": {"-n", "--namespace", "--context", "--kubeconfig", "-l", "--selector", "--cluster", "--user"},
    "helm": {"-n", "--namespace", "--kube-context", "--kubeconfig"},
    "npm": {"--prefix", "-w", "--workspace"},
    "pnpm": {"-C", "--dir", "--filter", "-F"},
    "yarn": {"--cwd"},
    "cargo": {"--manifest-path", "-Z", "--config"},
    "make": {"-C", "-f", "--directory", "--file", "-j"},
    "terraform": {"-chdir"},
    "aws": {"--profile", "--region", "--output", "--endpoint-url"},
    "gcloud": {"--project", "--account", "--configuration"},
    "az": {"--subscription", "-o", "--output"},
}
OPERATORS = frozenset({"|", "||", "&&", ";", "&", "\n"})
_WORD = re.compile(r"^[a-z][a-z0-9:_-]{0,39}$")  # a subcommand: no path, no dot, no '='
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAX_DEPTH = 3  # bash -c 'sh -c "..."' nests at most this deep
MAX_PARTS = 20  # the kinds kept of a long script: the rest is summed up


_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def _without_heredocs(command: str) -> str:
    """The command with here-documents' bodies left out: their lines are data."""
    out, until = [], None
    for line in command.split("\n"):
        if until is not None:
            if line.strip() == until:
                until = None
            continue
        out.append(line)
        m = _HEREDOC.search(line)
        if m:
            until = m.group(1)
    return "\n".join(out)


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(_without_heredocs(command).replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the words as written
        return re.split(r"\s+|(?=[;&|])|(?<=[;&|])", command)


def _segments(tokens: list[str]) -> list[tuple[str, list[str]]]:
    """(the operator before it, its words) per simple command; redirections dropped."""
    out: list[tuple[str, list[str]]] = []
    op, skip = "", False
    words: list[str] = []
    for t in tokens:
        if not t:
            continue
        if set(t) <= set(";&|"):
            if words:
                out.append((op, words))
            op, words = ("|" if t == "|" else ";" if t in (";", "&") else t), []
            continue
        if t in ("(", ")"):
            continue
        if set(t) <= set("<>"):
            skip = True  # the redirection's target is a path, not a word of the command
            continue
        if skip:
            skip = False
            continue
        words.append(t)
    if words:
        out.append((op, words))
    return out


PROGRAM_CHARS = 64


def _program(word: str) -> str:
    return (os.path.basename(word.rstrip("/")) or word).strip("'\"")[:PROGRAM_CHARS]


def _skip_options(words: list[str], i: int, program: str) -> int:
    takes_value = VALUE_OPTIONS.get(program, set())
    while i < len(words) and words[i].startswith("-"):
        opt = words[i].split("=", 1)[0]
        i += 2 if opt in takes_value and "=" not in words[i] else 1
    return i


def _kind_of(words: list[str], depth: int) -> str:
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1  # FOO=bar git push
    if i >= len(words):
        return ""
    program = _program(words[i])
    if program in WRAPPERS:
        rest = _after_wrapper(program, words[i + 1 :])
        inner = _kind_of(rest, depth) if rest else ""
        if program in ("sudo", "doas"):
            return f"{program} {inner}".strip()
        return inner or program
    if program in SHELLS and depth < MAX_DEPTH:
        j = i + 1
        while j < len(words) and words[j].startswith("-"):
            if "c" in words[j].lstrip("-") and j + 1 < len(words):
                return kind(words[j + 1], depth + 1) or program
            j += 1
        return program
    if program in ("python", "python3", "python2", "py"):
        j = i + 1
        while j < len(words) and words[j].startswith("-") and words[j] != "-m":
            j += 1
        if j + 1 < len(words) and words[j] == "-m":
            return f"{program} -m {words[j + 1]}"
        return program
    key = [program]
    levels = LEVELS.get(program, 1 if program in SUBCOMMANDS else 0)
    j = i + 1
    for _ in range(levels):
        j = _skip_options(words, j, program)
        if j < len(words) and _WORD.match(words[j]):
            key.append(words[j])
            j += 1
        else:
            break
    return " ".join(key)


def _after_wrapper(program: str, rest: list[str]) -> list[str]:
    """The command a wrapper runs: its own options (and `timeout`'s duration, `env`'s
    assignments) skipped."""
    i = 0
    while i < len(rest) and (rest[i].startswith("-") or _ASSIGNMENT.match(rest[i])):
        i += 2 if program == "sudo" and rest[i] in ("-u", "-g", "-C", "-D") else 1
    if program == "timeout" and i < len(rest):
        i += 1  # the duration
    return rest[i:]


def kind(command: str, depth: int = 0) -> str:
    """The command's kind of action: `git push`, `curl | sh`, `npm test && git push`;
    "" for an empty command."""
    parts: list[tuple[str, str]] = []
    for op, words in _segments(_tokens(command)):
        k = _kind_of(words, depth)
        if not k or k == "cd":
            continue
        if parts and parts[-1][1] == k:
            continue  # `a && a` is a
        parts.append((op, k))
    if len(parts) > MAX_PARTS:
        parts = parts[:MAX_PARTS] + [(";", f"{len(parts) - MAX_PARTS} more")]
    text = ""
    for op, k in parts:
        sep = "" if not text else " | " if op == "|" else f" {op} " if op in ("&&", "||") else "; "
        text += sep + k
    return text
