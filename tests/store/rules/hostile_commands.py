"""Shell commands a hostile agent might send hoping an allow rule (`git status`, `ls *`, `npm test`) covers them.

Built from the classes that got through bashlex (a word starting with `~`, a word framed by single quotes),
and from bash's manual: parameter, arithmetic, brace, tilde and process substitution, `$'…'` and `$"…"`
quoting, `${IFS}`, line continuations, comments, redirections and here-documents, reserved words,
`eval`/`exec`/`env -S`/`sh -c` (also in list form), history and extended globs, Unicode lookalikes, NUL, CR
and other controls. `PAYLOADS` are what the substitutions run. None of these may be allowed; `BENIGN`
must be (or the check passes by refusing everything).
"""

from __future__ import annotations

from typing import Any

PAYLOADS = ("touch /tmp/PWNED", "rm -rf ~")

TEMPLATES = [
    # a word starting with ~: bashlex folds everything up to the first / into one tilde word
    "ls ~$({p})", "ls -la ~$({p})", "ls ~<({p})", "ls ~>({p})", "ls ~:$({p})", "ls ~`{p}`", "ls ~root$({p})",
    "ls ~+$({p})", "ls ~-$({p})", "ls ~\"$({p})\"", "ls ~'x'$({p})", "ls ~/$({p})", "ls ~$({p})/x",
    "git status ~$({p})", "npm test ~$({p})", "ls --hide=~$({p})",
    # a word starting and ending with ': bashlex takes it for one single-quoted word
    "ls ''$({p})''", "ls 'x'`{p}`'y'", "ls ''`{p}`''", "ls '\"'$({p})'\"'", "ls 'a'\"$({p})\"'b'", "ls ''<({p})''",
    "ls 'x'$({p})'y' z", "git status ''$({p})''", "npm test ''$({p})''", "npm test 'x'`{p}`'y'",
    # substitutions anywhere
    "ls $({p})", "ls `{p}`", "ls \"$({p})\"", "ls \"`{p}`\"", "ls <({p})", "ls >({p})", "ls x$({p})", "ls $({p})x",
    "ls -la --color=$({p})", "ls -- \"$({p})\"", "ls $(ls; {p})", "ls $(echo $({p}))",
    # parameter and arithmetic expansion
    "ls ${{x:-$({p})}}", "ls ${{x[$({p})]}}", "ls \"${{x:=$({p})}}\"", "ls ${{x/$({p})/y}}", "ls $(( $({p}) ))",
    "ls $[$({p})]", "ls $((x[$({p})]))", "ls ${{x:-`{p}`}}",
    # lists, pipes and compound commands around an allowed command
    "ls; {p}", "ls && {p}", "ls || {p}", "ls | {p}", "ls & {p}", "ls\n{p}", "ls\r\n{p}", "(ls; {p})", "{{ ls; {p}; }}",
    "git status; {p}", "git status && {p}", "npm test\n{p}", "if ls; then {p}; fi", "while ls; do {p}; done",
    "for x in $({p}); do ls; done", "f() {{ {p}; }}; ls", "ls # \n{p}", "ls \\\n; {p}", "ls |& {p}", "ls;; {p}",
    # wrappers and shells
    "bash -c 'ls; {p}'", "sh -c \"ls ~$({p})\"", "eval 'ls; {p}'", "env -S 'ls; {p}'", "xargs {p}", "ls | sh -c '{p}'",
    # here-documents and here-strings
    "ls <<EOF\n$({p})\nEOF", "ls <<<$({p})", "bash <<< '{p}'",
]

FIXED = [
    # parameter expansion with no substitution (words only known at run time)
    "ls $HOME", "ls ${HOME}", "ls $1", "ls $@", "ls $*", "ls $#", "ls $?", "ls $$", "ls $!", "ls $-", "ls $_",
    "ls ${!x}", "ls ${PS1@P}", "ls${IFS}-la", "ls ${IFS}x", "ls $'\\x41'", "ls $'a\\nb'", "ls $\"x\"",
    "npm test $X", "git status $X",
    # brace expansion, ANSI-C quoting of a command name
    "{rm,-rf,~}", "ls; {rm,-rf,~}", "ls {a,b}", "ls {a..z}", "ls; r{m,x} -rf ~", "$'\\x72\\x6d' -rf ~",
    "ls; $'rm' -rf ~",
    # redirections
    "ls > ~/.bashrc", "ls >> ~/.ssh/authorized_keys", "ls < /etc/shadow", "ls 2>/tmp/x", "ls &>/tmp/x",
    "ls >&/tmp/x", "ls >| x", "ls <> x", "ls 2>&1x", "ls >&-", "ls 1>&2-", "npm test > ~/.bashrc",
    # reserved words, history, extended globs
    "! ls", "time ls", "coproc ls", "[[ -f x ]] && ls", "case x in x) ls;; esac", "function ls { rm -rf ~; }; ls",
    "ls !!", "ls !(x)", "ls @(x)", "ls +(x)", "ls *(x)", "ls ?(x)",
    # wrappers an allow rule for ls does not name
    "eval ls", "exec ls", "env ls", "command ls", "builtin ls", "sudo ls", "nohup ls", "xargs ls", "ls | sh",
    ". /tmp/x", "source /tmp/x", "X=1 ls", "PATH=/tmp/evil ls", "cd /tmp && ls",
    # Unicode lookalikes and control characters
    "ls\u00a0;\u00a0rm -rf ~", "ls\uff1brm -rf ~", "ls \uff04(rm -rf ~)", "ls\u3000-la", "ls\x0brm -rf ~",
    "ls\x0crm -rf ~", "ls\rrm -rf ~", "ls \u2028rm -rf ~", "ls\u200b$(rm -rf ~)", "ls \u202e", "ls\x00; rm -rf ~",
    "ls \x1b[2K", "l\u0455", "ls\u2024sh",
    # broken syntax
    "", " ", "\t", "ls '", "ls \"", "ls (", "ls )", "ls \\", "ls &&", "&& ls", "; ls", "ls | | ls",
    "{ ls }", "(ls", "ls)", "a='x[$(touch /tmp/PWNED)]'; ((a)) && ls", "((ls))",
    # git and npm variants the exact rules do not cover
    "git -c core.fsmonitor='touch /tmp/PWNED' status", "git -C /elsewhere status", "GIT_DIR=/x git status",
    "npm test --script-shell=/tmp/evil", "npm  test -- $(touch /tmp/PWNED)",
]

LISTS: list[list[str]] = [
    ["bash", "-c", "ls ~$(touch /tmp/PWNED)"], ["/bin/sh", "-c", "ls ''$(touch /tmp/PWNED)''"],
    ["bash", "-c", "ls $(rm -rf ~)"], ["sh", "-c", "ls; rm -rf ~"], ["bash", "-lc", "ls ~<(rm -rf ~)"],
    ["dash", "-c", "ls ~:$(rm -rf ~)"], ["sh", "-c", "ls 'x'`rm -rf ~`'y'"], ["bash", "-c", "ls\nrm -rf ~"],
    ["/usr/bin/env", "bash", "-c", "ls"], ["env", "sh", "-c", "rm -rf ~"], ["bash", "-c", "ls", "x"],
    ["busybox", "sh", "-c", "ls"], ["bash", "-c", "{rm,-rf,~}"], ["sh", "-c", "$'\\x72\\x6d' -rf ~"],
    ["ls", "-la", "\x00"], ["rm", "-rf", "~"],
]


def hostile() -> list[Any]:
    """Every hostile command: the templates with each payload, the fixed strings and the list forms."""
    out: list[Any] = [t.format(p=p) for t in TEMPLATES for p in PAYLOADS]
    return out + FIXED + LISTS


NOT_BLANKS = ("\x00", "\uff1b", "\uff04", "\u00a0", "\x0b", "\x0c", "\u2028", "\u3000")
DENIED = [c for c in hostile() if ("rm -rf ~" in (c if isinstance(c, str) else " ".join(c)))
          and not any(x in (c if isinstance(c, str) else " ".join(c)) for x in NOT_BLANKS)]
"""Commands that run `rm -rf ~` somewhere: a deny rule for `rm *` must catch every one (plus the encoded ones
in `DENIED_ENCODED`). Where a look-alike or control character stands for a blank or an operator, bash runs
no `rm` (it sees one word, `ls\u00a0rm` or `\u00a0rm`): those are not in the list."""

DENIED_ENCODED = ["{rm,-rf,~}", "ls; {rm,-rf,~}", "ls; r{m,x} -rf ~", "$'\\x72\\x6d' -rf ~", "ls; $'rm' -rf ~",
                  ["bash", "-c", "{rm,-rf,~}"], ["sh", "-c", "$'\\x72\\x6d' -rf ~"], "ls; \\rm -rf ~",
                  "ls; /bin/rm -rf ~", "ls; r\\\nm -rf ~", "ls; sudo -u root rm -rf ~", "X=1 rm -rf ~",
                  ">/dev/null rm -rf ~", "ls; \"r\"'m' -rf ~", "ls; rm${IFS}-rf${IFS}~", "ls; rm$IFS-rf$IFS~",
                  "echo 'rm -rf ~' | bash", "ls; find / -exec rm -rf {} +"]

MAYBE_DENIED = ["ls; $CMD -rf ~", "ls; `which rm` -rf ~", "ls; r$X -rf ~", "ls; \"$(echo rm)\" -rf ~",
                ["sh", "-c", "$0 -rf ~"]]
"""The command is only known at run time: it may be `rm`. A deny rule for `rm *` does not deny these
outright; it asks a person (an ask beats every allow)."""

BENIGN: list[Any] = [
    "ls", "ls -la", "ls *.py", "ls ~", "ls ~/src", "ls 'a b'", "ls \"a b\"", "ls a\\ b", "ls -la /tmp", "git status",
    "npm test", "ls && git status", "npm test; ls", "(ls)", "{ ls; }", "ls | ls", "ls 2>&1", "ls >&2",
    "ls -la\nnpm test", "  ls  ", "ls;", "ls \"it's\"", "ls 'say \"hi\"'", "ls --color=auto", "ls a=b", "ls caf\u00e9",
    "ls \"\u00fcn\u00efc\u00f6d\u00e9\"", "ls -- -x", "ls a#b", "ls 100%", "ls a,b", "ls user@host:x",
    "npm test && npm test", "ls &", "ls & git status", "ls '$(not run)'", "ls '`not run`'", "ls \"a\\\"b\"",
    "'ls' -la", "l\"s\"", "ls 'x'\"y\"z", "ls ~/a/b", "ls ?.txt", "ls [ab].txt", "(ls && npm test) || git status",
    ["ls", "-la"], ["bash", "-c", "ls -la"], ["sh", "-c", "git status"], ["ls", "$(not run: no shell)"],
]
