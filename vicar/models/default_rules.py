"""The rules every principal has from the start: ask the person about what cannot be undone.

Deleting files or data, rewriting history, dropping tables, destroying infrastructure,
removing containers and volumes, formatting devices, publishing packages, running a
downloaded script, widening permissions: whatever the proxy has learned, these go to the
person, in shell commands (the coding-agent hooks' artifact is the command line), SQL,
cloud and container CLIs, and in any gate's artifact or question. They are ordinary `ask`
rules (vicar/models/control.py builds them: DEFAULT_RULES), listed with the person's own (`vicar rules list` marks
them "default"), and the person removes one like their own (`vicar rules remove alice
default-publish`); `vicar rules restore` brings it back. Written as RE2 patterns, tested
against real command lines (tests/test_default_rules.py), their false alarms on routine
work measured in docs/rules.md.

A pattern that wants a command, not a word in prose, anchors at a command's start: the
start of a line, after `$ `, a shell operator or `sudo`.
"""

from __future__ import annotations

AUTHOR = "vicar"  # who the defaults are by: shown as "(vicar's)", never a person
PREFIX = "default-"
# Where a command starts: a line's start, a prompt, a shell operator, a subshell, sudo.
_AT = r"(?:^|[;&|(`]\s*|\$\s+|\$\(\s*|\bsudo\s+(?:-\S+\s+)*|\bxargs\s+(?:-\S+\s+)*|\bexec\s+)"
# A program's own options (and one value each) before its subcommand: git -C dir push.
_OPTS = r"(?:-\S+\s+(?:[^-\s;&|]\S*\s+)?)*"
_ARGS = r"[^\n;&|]*"  # the rest of one simple command


def _any(*patterns: str) -> str:
    return "(?m)(?:" + "|".join(patterns) + ")"


_SPECS: list[tuple[str, str, str]] = [
    (
        "delete-files",
        "deletes files or directories, which cannot be undone",
        _any(
            rf"{_AT}(?:\S*/)?rm\s+\S",
            rf"{_AT}(?:\S*/)?(?:shred|srm|wipe)\s",
            rf"\bfind\b{_ARGS}\s-delete\b",
            rf"\bfind\b{_ARGS}-exec(?:dir)?\s+rm\b",
            rf"{_AT}truncate\s+(?:-s\s*0|--size[= ]0)\b",
            r"\bRemove-Item\b",
            r"(?i)\b(?:del|erase)\s+/[sq]\b",
            r"(?i)\brd\s+/s\b",
            rf"\bgit\s+{_OPTS}rm\s+{_ARGS}-r\b",
            r"\bcrontab\s+(?:-\S+\s+)*-r\b",
            rf"\brsync\b{_ARGS}\s--delete",
            rf"\b(?:mv|cp)\b{_ARGS}\s/dev/null\b",
            r"\bcat\s+/dev/null\s*>",
        ),
    ),
    (
        "rewrite-history",
        "rewrites or deletes version history, or throws away uncommitted work",
        _any(
            rf"\bgit\s+{_OPTS}push\b{_ARGS}(?:\s--force(?:-with-lease)?\b|\s-[a-zA-Z]*f[a-zA-Z]*\b|\s\+\S|\s--delete\b|\s-d\b|\s--mirror\b|\s--prune\b|\s:\S)",
            rf"\bgit\s+{_OPTS}reset\b{_ARGS}--hard\b",
            rf"\bgit\s+{_OPTS}clean\b{_ARGS}-[a-zA-Z]*f",
            rf"\bgit\s+{_OPTS}branch\b{_ARGS}(?:\s-D\b|\s--delete\b{_ARGS}--force\b|\s-[a-zA-Z]*d[a-zA-Z]*f)",
            rf"\bgit\s+{_OPTS}(?:filter-branch|filter-repo)\b",
            rf"\bgit\s+{_OPTS}(?:checkout|restore)\s+(?:-f\s+)?(?:--\s+)?\.(?:\s|$)",
            rf"\bgit\s+{_OPTS}checkout\s+-f\b",
            rf"\bgit\s+{_OPTS}stash\s+(?:drop|clear)\b",
            rf"\bgit\s+{_OPTS}(?:reflog\s+(?:expire|delete)|update-ref\s+-d|gc\b{_ARGS}--prune=now)\b",
            rf"\bgit\s+{_OPTS}tag\b{_ARGS}(?:\s-d\b|\s--delete\b)",
            rf"\bhg\s+{_OPTS}(?:strip|prune|push\b{_ARGS}(?:-f|--force))\b",
        ),
    ),
    (
        "drop-data",
        "drops or erases stored data (tables, databases, keys)",
        _any(
            r"(?i)\bdrop\s+(?:table|database|schema|index|view|user|role|collection|keyspace|materialized\s+view)\b",
            r"(?i)\btruncate\s+table\b",
            r"(?i)\btruncate\s+[\w.\"`]+\s*;",
            r"\bDELETE\s+FROM\s",
            r"(?i)\bdelete\s+from\s+[\w.\"`\[\]]+\s*(?:;|$|\"|'|where\b)",
            r"\b(?:db:drop|db:reset|db:purge|migrate:fresh|migrate:reset)\b",
            r"\bmigrate\s+reset\b|\bmanage\.py\s+(?:flush|reset_db)\b",
            r"\bredis-cli\b[^\n;&|]*\s(?:DEL|UNLINK)\s",
            r"(?i)\balter\s+table\s+\S+\s+drop\b",
            r"\b(?:dropdb|dropuser)\b",
            r"(?i)\bflush(?:all|db)\b",
            r"(?i)\.(?:dropDatabase|drop)\(\s*\)",
            r"(?i)\bdelete_?many\(\s*\{\s*\}\s*\)",
        ),
    ),
    (
        "destroy-infrastructure",
        "destroys cloud or cluster resources",
        _any(
            rf"\b(?:terraform|tofu)\s+{_OPTS}(?:destroy\b|apply\b{_ARGS}-destroy\b)",
            r"\b(?:pulumi\s+(?:destroy|down)|cdk\s+destroy|sst\s+remove)\b",
            rf"\b(?:kubectl|oc)\s+{_OPTS}(?:delete|drain)\b",
            rf"\bhelm\s+{_OPTS}(?:uninstall|delete|del)\b",
            rf"\baws\b{_ARGS}\s(?:rm|rb|delete[\w-]*|terminate[\w-]*|remove[\w-]*|deregister[\w-]*|purge[\w-]*)\b",
            rf"\b(?:gcloud|az|doctl|eksctl|hcloud|oci|ibmcloud|linode-cli)\b{_ARGS}\s(?:delete|destroy|remove|rm|purge)\b",
            rf"\bgsutil\s+{_OPTS}(?:rm|rb)\b",
            r"\bheroku\s+(?:apps:destroy|apps:delete|pg:reset)\b",
            r"\bfly(?:ctl)?\s+(?:apps\s+)?destroy\b",
            r"\bvercel\s+(?:remove|rm)\b",
            r"\bsupabase\s+db\s+reset\b",
            r"\b(?:terraform|tofu)\s+state\s+rm\b",
            r"\bgh\s+(?:repo|release|secret|variable)\s+delete\b",
            r"\bbq\s+(?:-\S+\s+)*rm\b",
            rf"\b(?:kubectl|oc)\s+{_OPTS}scale\b{_ARGS}--replicas[= ]0\b",
            r"\bPlan: \d+ to add, \d+ to change, [1-9]\d* to destroy",
            r"(?m)^\s*#\s.*\bwill be destroyed\b",
        ),
    ),
    (
        "remove-containers",
        "removes containers, images or volumes and the data in them",
        _any(
            rf"\b(?:docker|podman|nerdctl)\s+{_OPTS}(?:rm|rmi|kill)\b",
            rf"\b(?:docker|podman|nerdctl)\s+{_OPTS}(?:system|volume|image|container|network|builder)\s+(?:prune|rm)\b",
            rf"\bdocker[ -]compose\s+{_OPTS}down\b{_ARGS}(?:\s-v\b|--volumes\b|--rmi\b)",
        ),
    ),
    (
        "overwrite-devices",
        "formats or overwrites a disk or device, or stops the machine",
        _any(
            rf"\bdd\b{_ARGS}\bof=/dev/",
            r"\bmkfs(?:\.\w+)?\s",
            rf"{_AT}(?:fdisk|sfdisk|parted|gdisk|sgdisk|wipefs|blkdiscard|diskpart)\b",
            r">\s*/dev/(?:sd|hd|nvme|vd|xvd|mmcblk|disk)\w*",
            r"\bcryptsetup\s+(?:luksFormat|erase)\b",
            r"(?i)\bformat\s+[a-z]:",
            rf"{_AT}(?:shutdown|reboot|halt|poweroff)\b",
            r"\bsystemctl\s+(?:poweroff|reboot|halt|kexec)\b",
            rf"{_AT}init\s+[06]\b",
        ),
    ),
    (
        "publish",
        "publishes a package or a release for others to download",
        _any(
            rf"\b(?:npm|pnpm|yarn|bun)\s+{_OPTS}(?:publish|unpublish|deprecate)\b",
            r"\bcargo\s+(?:publish|yank)\b",
            r"\btwine\s+upload\b",
            r"\b(?:poetry|uv|hatch|flit|pdm)\s+publish\b",
            r"\bsetup\.py\s{0,40}(?:sdist\s+|bdist_wheel\s+)*upload\b",
            r"\bgem\s+(?:push|yank)\b",
            r"\b(?:dotnet\s+)?nuget\s+push\b",
            rf"\bmvn\b{_ARGS}\bdeploy\b",
            r"\bgh\s+release\s+(?:create|upload|delete)\b",
            rf"\b(?:docker|podman|helm)\s+{_OPTS}push\b",
            r"\b(?:vsce|ovsx)\s+publish\b",
            r"\bpod\s+trunk\s+push\b",
            r"\bgoreleaser\s+release\b",
        ),
    ),
    (
        "pipe-to-shell",
        "runs a script fetched from the network without showing it to you",
        _any(
            r"(?i)\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?(?:ba|z|k|da|fi)?sh\b",
            r"(?i)\b(?:curl|wget)\b[^\n;&]*\|\s*(?:sudo\s+)?(?:python[23]?|perl|ruby|node|php)\b",
            r"\b(?:ba|z)?sh\s+(?:-\S+\s+)*<\(\s*(?:curl|wget)\b",
            r"\b(?:ba|z)?sh\s+-c\s+[\"']?\$\(\s*(?:curl|wget)\b",
            r"\bsource\s+<\(\s*(?:curl|wget)\b",
            r"(?i)\b(?:iex|invoke-expression)\b",
        ),
    ),
    (
        "widen-permissions",
        "widens who may read, write or run something",
        _any(
            rf"\bchmod\s+{_OPTS}(?:[0-7]?[0-7][0-7][2367]\b|(?:[ug]*[ao][ug]*)[+=][rwxXst]*w|\+[rwxXst]*w)",
            rf"\bchmod\b{_ARGS}(?:\s-R\b|\s--recursive\b)",
            rf"\bchown\b{_ARGS}(?:\s-R\b|\s--recursive\b)",
            r"\b(?:setfacl|icacls)\b",
            r"(?i)--acl\s+public-read",
            r"\ballUsers\b|\ballAuthenticatedUsers\b",
            r"\b0\.0\.0\.0/0\b",
            r"(?i)\bgrant\s+all\b",
            r"\busermod\s[^\n;&|]*-a?G\s*\S*\b(?:sudo|wheel|docker|root|admin)\b",
            r"\bvisudo\b|/etc/sudoers\b",
        ),
    ),
]


DEFAULT_NAMES: frozenset[str] = frozenset(PREFIX + key for key, _, _ in _SPECS)
SPECS: tuple[tuple[str, str, str], ...] = tuple((PREFIX + key, why, regex) for key, why, regex in _SPECS)


def is_default(name: str) -> bool:
    return name in DEFAULT_NAMES
