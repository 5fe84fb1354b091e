"""The audit's reading of a step against real bash: it never says "run" where bash would skip the runner
or swallow its failure (docs/audit-shell.md).

One table of cases, each a nightly step in a tree built from ``registered/fixtures/sglang/base/``
(self-written) and the verdict the audit must give for the r1 suite: ``run`` (no finding for it, no
masked step), ``masked`` (a masked-step finding), ``dormant`` (a dormant-suite error: never reached)
or ``maybe`` (a dormant-suite warning: reached only past something known at run time). The same
scripts are then run by real bash (GitHub's command line for the step's shell) with a stub
``python3`` that records the runner call and exits 1: wherever the step still exits 0, the audit
must not have said ``run``. Each shell case here was a false green of the audit before.
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ci.audit.foreign import run_foreign_audit
from ci.registration import register
from registered.skips import registered_skip
from registered.test_ci_audit_sglang import materialize

SUITE = ("amd", "nightly-amd-8-gpu-mi35x-r1", "nightly")
R = "python3 test/run_suite.py --hw amd --suite nightly-amd-8-gpu-mi35x-r1 --nightly"
ARGS = "test/run_suite.py --hw amd --suite nightly-amd-8-gpu-mi35x-r1 --nightly"
# what GitHub runs for each `shell:` (None: no shell named)
GITHUB_SHELLS = {None: "bash -e {0}", "bash": "bash --noprofile --norc -eo pipefail {0}", "sh": "sh -e {0}",
                 "python": "python3 {0}"}

# name: (script, step keys (shell:, env:), files written into the tree, the audit's verdict)
CASES: dict[str, tuple[str, dict, dict, str]] = {
    # controls
    "plain": (f"{R}\n", {}, {}, "run"),
    "or-true": (f"{R} || true\n", {}, {}, "masked"),
    "exit-0-before": (f"exit 0\n{R}\n", {}, {}, "dormant"),
    "and-last": (f"{R} && echo passed\n", {}, {}, "run"),                   # the list ends the script
    "cd-and-last": (f"cd . && {R}\n", {}, {}, "run"),
    "rc-rethrown": (f"{R} || rc=$?\necho collected\nexit $rc\n", {}, {}, "run"),
    "pipestatus-right-after": (f"{R} | tee log\nexit ${{PIPESTATUS[0]}}\n", {}, {}, "run"),
    "cleanup-trap": (f"trap 'rm -f log' EXIT\n{R}\n", {}, {}, "run"),
    "source-in-tree": (f"source ci/env.sh\n{R}\necho done\n", {}, {"ci/env.sh": "export A=1\n"}, "run"),
    "bash-ec": (f"bash -ec '{R}; echo done'\n", {}, {}, "run"),
    "exec-redirect": (f"exec 2>&1\n{R}\n", {}, {}, "run"),
    "func-shadow": (f"python3() {{ :; }}\n{R}\n", {}, {}, "dormant"),
    "subshell-set-minus-e": (f"set +e\n( set -e )\n{R}\necho done\n", {}, {}, "masked"),
    # A1: the left side of && is exempt from set -e
    "and-after-runner": (f"{R} && echo passed\necho done\n", {}, {}, "masked"),
    "and-before-runner": (f"grep -q never-there test/run_suite.py && {R}\necho done\n", {}, {}, "maybe"),
    # A2: errexit off where a flat reading does not look
    "set-plus-o-errexit": (f"set +o errexit\n{R}\necho done\n", {}, {}, "masked"),
    "shopt-uo-errexit": (f"shopt -uo errexit\n{R}\necho done\n", {}, {}, "masked"),
    "then-set-plus-e": (f"if true; then set +e; fi\n{R}\necho done\n", {}, {}, "masked"),
    "brace-set-plus-e": (f"{{ set +e; }}\n{R}\necho done\n", {}, {}, "masked"),
    "func-set-plus-e": (f"relax() {{ set +e; }}\nrelax\n{R}\necho done\n", {}, {}, "masked"),
    "dead-set-minus-e": (f"set +e\nfalse && set -e\n{R}\necho done\n", {}, {}, "masked"),
    "set-dashdash-e": (f"set +e\nset -- -e\n{R}\necho done\n", {}, {}, "masked"),
    "source-set-plus-e": (f"source ci/env.sh\n{R}\necho done\n", {}, {"ci/env.sh": "set +e\n"}, "masked"),
    # A3: compound commands whose status is masked
    "for-done-or-true": (f"for s in r1; do\n  {R}\ndone || true\n", {}, {}, "masked"),
    "if-fi-or-true": (f"if true; then\n  {R}\nfi || true\n", {}, {}, "masked"),
    "case-esac-or-true": (f"case x in\n  x) {R} ;;\nesac || true\n", {}, {}, "masked"),
    "if-fi-pipe-tee": (f"if true; then\n  {R}\nfi | tee log\n", {}, {}, "masked"),
    "if-own-line-cond": (f"if\n  {R}\nthen echo ok; fi\n", {}, {}, "masked"),
    # A4: traps
    "trap-dashdash": (f"trap -- 'exit 0' EXIT\n{R}\n", {}, {}, "masked"),
    "trap-func-handler": (f"bye() {{ exit 0; }}\ntrap bye EXIT\n{R}\n", {}, {}, "masked"),
    "trap-in-then": (f"if true; then trap 'exit 0' EXIT; fi\n{R}\n", {}, {}, "masked"),
    # A5: rethrow checks
    "rc-reset-before-exit": (f"{R} || rc=$?\nrc=0\nexit $rc\n", {}, {}, "masked"),
    "rc-exit-dead-branch": (f"{R} || rc=$?\nif false; then exit $rc; fi\n", {}, {}, "masked"),
    "pipestatus-stale": (f"{R} | tee log\necho done\nexit ${{PIPESTATUS[0]}}\n", {}, {}, "masked"),
    # A6: the runner never runs
    "exec-before": (f"exec echo starting\n{R}\n", {}, {}, "dormant"),
    "alias-shadow": (f"shopt -s expand_aliases\nalias python3=true\n{R}\n", {}, {}, "maybe"),
    "break-in-loop": (f"for s in r1; do\n  break\n  {R}\ndone\n", {}, {}, "dormant"),
    "continue-in-loop": (f"for s in r1; do\n  continue\n  {R}\ndone\n", {}, {}, "dormant"),
    "coproc": (f"coproc {R}\n", {}, {}, "masked"),
    "heredoc-indented-eof": (f"cat <<EOF\n  EOF\n{R}\nEOF\n", {}, {}, "dormant"),
    "ansi-c-quote": (f"echo $'\\' ; {R} ; echo '\n", {}, {}, "dormant"),
    "source-exit0": (f". ./ci/env.sh\n{R}\n", {}, {"ci/env.sh": "exit 0\n"}, "dormant"),
    "source-outside": (f"source /etc/nonexistent-ci-env.sh || true\n{R}\n", {}, {}, "maybe"),
    "case-fallthrough": (f"case a in\n  a) echo a ;&\n  b) exit 0 ;;\nesac\n{R}\n", {}, {}, "maybe"),
    # A7: runner-shaped words that do not run it
    "python-c": (f"python3 -c 'print(1)' {ARGS}\n", {}, {}, "dormant"),
    "bin-echo": (f"/bin/echo {ARGS}\n", {}, {}, "dormant"),
    "builtin-echo": (f"builtin echo {R}\n", {}, {}, "dormant"),
    # A8: step shells and environment
    "shell-bash-0-e": (f"{R}\necho done\n", {"shell": "bash {0} -e"}, {}, "masked"),
    "shell-plus-o-pipefail": (f"{R} | tee log\n", {"shell": "bash -e +o pipefail {0}"}, {}, "masked"),
    "shell-sh-dbl-bracket": (f"if [[ a == a ]]; then\n  {R}\nfi\n", {"shell": "sh"}, {}, "maybe"),
    "shell-python-polyglot": (f'"""exec" {R}\n"""\n', {"shell": "python"}, {}, "masked"),   # and a maybe
    "bash-env": (f"{R}\n", {"env": {"BASH_ENV": "ci/env.sh"}}, {"ci/env.sh": "exit 0\n"}, "masked"),
    # an earlier step of the job ("before": its script) that may set the runner step's shell environment
    "github-env-comment": (f"{R}\n", {"before": "# set up (GITHUB_ENV may not reach later steps)\necho prep\n"},
                           {}, "run"),
    "github-env-bash-env": (f"{R}\n", {"before": 'echo "BASH_ENV=ci/env.sh" >> "$GITHUB_ENV"\n'}, {}, "masked"),
    "github-env-quoted-hash-line": (f"{R}\n", {"before": 'echo "BASH_ENV=ci/env.sh\n# end" >> "$GITHUB_ENV"\n'}, {},
                                    "masked"),
    "github-env-unnamed": (f"{R}\n", {"before": 'echo "$LINE" >> "$GITHUB_ENV"\n'}, {}, "masked"),  # a warning
    # more false greens the audit once gave (it said run, bash stayed green)
    "procsub-cat": (f"cat <({R})\n", {}, {}, "masked"),
    "find-exec": (f"find . -maxdepth 0 -exec {R} \\;\n", {}, {}, "masked"),
    "trap-debug-exit0": (f"trap 'exit 0' DEBUG\n{R}\n", {}, {}, "maybe"),
    "set-n": (f"set -n\n{R}\n", {}, {}, "dormant"),
    "set-o-noexec": (f"set -o noexec\n{R}\n", {}, {}, "dormant"),
    "hash-p-true": (f"hash -p /bin/true python3\n{R}\n", {}, {}, "maybe"),
    "trap-return-err": (f"f() {{ trap 'return 0' ERR; {R}; echo after; }}\nf\n", {}, {}, "masked"),
    "rc-local-func": (f"f() {{ local rc=0; {R} || rc=$?; }}\nf\nexit $rc\n", {}, {}, "masked"),
    "heredoc-quoted-mid": (f"cat <<E\"O\"F\nE\n{R}\nEOF\n", {}, {}, "dormant"),
    "heredoc-quoted-part": (f"cat <<'E'OF\nE\n{R}\nEOF\n", {}, {}, "dormant"),
    # control: PATH changes are not followed (a python3 that always passes put first on PATH: docs' limits)
    "path-fake-python3-control": (f"export PATH=$HOME/.local/bin:$PATH\n{R}\n", {}, {}, "run"),
    # checked against bash, no false green (a false red once: the audit said never)
    "heredoc-backslash": (f"cat <<\\EOF\nhi\nEOF\n{R}\n", {}, {}, "run"),
    "bash-e-c-split": (f"bash -e -c '{R}; echo done'\n", {}, {}, "run"),
    "bash-o-errexit-c": (f"bash -o errexit -c '{R}; echo done'\n", {}, {}, "run"),
    "bash-c-plus-e-opt": (f"bash +e -c '{R}; echo done'\n", {}, {}, "masked"),
    # more shapes checked against bash
    "comment-backslash": (f"# note \\\nexit 0\n{R}\n", {}, {}, "dormant"),
    "heredoc-two": (f"cat <<A <<B\nA\nB\n{R}\n", {}, {}, "run"),
    "trap-exit-00": (f"trap 'exit 00' EXIT\n{R}\n", {}, {}, "masked"),
    "trap-exit-256": (f"trap 'exit 256' EXIT\n{R}\n", {}, {}, "masked"),
    "trap-err-256": (f"trap 'exit 256' ERR\n{R}\n", {}, {}, "masked"),
    "exit-256-before": (f"exit 256\n{R}\n", {}, {}, "dormant"),
    "eval-known-or-true": (f"cmd='{R} || true'\neval \"$cmd\"\n", {}, {}, "masked"),
    "f-subshell-body": (f"f() (\n  {R}\n  echo after\n)\nf\n", {}, {}, "run"),
    "f-subshell-body-plus-e": (f"f() (\n  set +e\n  {R}\n  echo after\n)\nf\n", {}, {}, "masked"),
    "retry-func-echo": (f"retry() {{ for i in 1 2; do \"$@\" && return 0; done; echo gave up; }}\nretry {R}\n", {}, {},
                        "masked"),
    "func-args-or-true": (f"f() {{ \"$@\"; }}\nf {R} || true\n", {}, {}, "masked"),
    "return-0-in-func": (f"f() {{ {R}; }}\ng() {{ f; return 0; }}\ng\n", {}, {}, "run"),
    "set-e-in-subshell-cond": (f"if (set -e; {R}; echo after); then echo ok; fi\n", {}, {}, "masked"),
    "for-last-iter": (f"for s in r1 r2; do\n  {R} || echo failed $s\ndone\n", {}, {}, "masked"),
    "var-exit-later-if": (f"{R} || FAILED=1\nif [ -n \"$FAILED\" ]; then echo failed; fi\n", {}, {}, "masked"),
    "trap-set-later-in-func": (f"setup() {{ trap 'exit 0' EXIT; }}\nsetup\n{R}\n", {}, {}, "masked"),
    "trap-exit-via-var": (f"H='exit 0'\ntrap \"$H\" EXIT\n{R}\n", {}, {}, "masked"),
    "trap-exit-sig-list": (f"trap 'exit 0' INT TERM EXIT\n{R}\n", {}, {}, "masked"),
    "nested-bash-c-set-plus-e": (f"bash -ec 'set +e; {R}; echo done'\n", {}, {}, "masked"),
    "sh-c-e": (f"sh -ec '{R}; echo done'\n", {}, {}, "run"),
    # checked against bash, no false green
    "func-if-cond": (f"f() {{\n  {R}\n  echo after\n}}\nif f; then echo ok; fi\n", {}, {}, "masked"),
    "func-or-true": (f"f() {{\n  {R}\n  echo after\n}}\nf || true\n", {}, {}, "masked"),
    "func-and-echo": (f"f() {{\n  {R}\n  echo after\n}}\nf && echo ok\n", {}, {}, "masked"),
    "func-set-e-inside-cond": (f"f() {{\n  set -e\n  {R}\n  echo after\n}}\nif f; then echo ok; fi\n", {}, {},
                               "masked"),
    "bg-wait": (f"{R} &\nwait\n", {}, {}, "masked"),
    "bg-wait-pid": (f"{R} &\nwait $!\n", {}, {}, "masked"),
    "time-run": (f"time {R}\necho done\n", {}, {}, "run"),
    "neg-run": (f"! {R}\necho done\n", {}, {}, "masked"),
    "neg-run-last": (f"! {R}\n", {}, {}, "masked"),
    "or-colon": (f"{R} || :\n", {}, {}, "masked"),
    "until-run": (f"until {R}; do sleep 0; break; done\n", {}, {}, "masked"),
    "while-not-run": (f"while ! {R}; do break; done\necho done\n", {}, {}, "masked"),
    "procsub-tee": (f"{R} > >(tee log)\n", {}, {}, "run"),
    "pipe-amp-tee": (f"{R} |& tee log\n", {}, {}, "masked"),
    "pipe-amp-tee-bash": (f"{R} |& tee log\n", {"shell": "bash"}, {}, "run"),
    "exec-procsub": (f"exec > >(tee log)\n{R}\n", {}, {}, "run"),
    "pipefail-off": (f"set +o pipefail\n{R} | tee log\n", {"shell": "bash"}, {}, "masked"),
    "pipefail-then-func-off": (f"off() {{ set +o pipefail; }}\noff\n{R} | tee log\n", {"shell":"bash"}, {}, "masked"),
    "trap-err-exit0": (f"trap 'exit 0' ERR\n{R}\n", {}, {}, "masked"),
    "trap-err-empty": (f"trap '' ERR\n{R}\necho done\n", {}, {}, "run"),
    "set-E-trap": (f"set -E\ntrap 'exit 0' ERR\nf() {{ {R}; }}\nf\n", {}, {}, "masked"),
    "command-run": (f"command {R}\necho done\n", {}, {}, "run"),
    "nohup-bg": (f"nohup {R} &\n", {}, {}, "masked"),
    "xargs": (f"echo r1 | xargs -I{{}} {R}\n", {}, {}, "run"),
    "timeout-run": (f"timeout 5 {R}\necho done\n", {}, {}, "run"),
    "timeout-124": (f"timeout 5 {R} || [ $? -eq 124 ]\n", {}, {}, "masked"),
    "if-not-run": (f"if ! {R}; then echo failed; fi\n", {}, {}, "masked"),
    "or-echo": (f"{R} || echo failed\n", {}, {}, "masked"),
    "brace-pipe-tee": (f"{{ {R}; }} 2>&1 | tee log\n", {}, {}, "masked"),
    "status-plus-e": (f"set +e\n{R}\nstatus=$?\necho $status\n", {}, {}, "masked"),
    "herestring-run": (f"{R} <<< 'x'\necho done\n", {}, {}, "run"),
    "subshell-exit-pipe": (f"{R} | (exit 0)\n", {}, {}, "masked"),
    "multi-runner": (f"{R} || true\n{R}\n", {}, {}, "masked"),
    "bash-login": (f"{R}\n", {"shell": "bash -l {0}"}, {}, "masked"),
    "return-in-func-or": (f"f() {{ {R} || return 0; }}\nf\n", {}, {}, "masked"),
    "quoted-set-plus-e": (f"set '+e'\n{R}\necho done\n", {}, {}, "masked"),
    "bs-set-plus-e": (f"\\set +e\n{R}\necho done\n", {}, {}, "masked"),
    "set-u-plus-e": (f"set -u +e\n{R}\necho done\n", {}, {}, "masked"),
    "set-plus-ex": (f"set +ex\n{R}\necho done\n", {}, {}, "masked"),
    "or-exec-true": (f"{R} || exec true\n", {}, {}, "masked"),
    "or-cat-log": (f"{R} > log 2>&1 || cat log\n", {}, {}, "masked"),
    "or-newline-true": (f"{R} ||\n  true\n", {}, {}, "masked"),
    "or-cont-true": (f"{R} \\\n  || true\n", {}, {}, "masked"),
    "nospace-or-true": (f"{R}||true\n", {}, {}, "masked"),
    "retry-break-loop": (f"for i in 1 2; do\n  {R} && break\ndone\necho done\n", {}, {}, "masked"),
    "subshell-set-plus-e": (f"(set +e; {R}; echo after)\n", {}, {}, "masked"),
    "trap-exit-0-num": (f"trap 'exit 0' 0\n{R}\n", {}, {}, "masked"),
    "trap-quoted-sig": (f"trap 'exit 0' \"EXIT\"\n{R}\n", {}, {}, "masked"),
    "bash-c-or-true": (f"bash -c '{R}' || true\n", {}, {}, "masked"),
    "rc-exit-default": (f"{R} || rc=$?\nexit ${{rc:-0}}\n", {}, {}, "run"),
    "rc-exit-quoted": (f"{R} || rc=$?\nexit \"$rc\"\n", {}, {}, "run"),
    "rc-in-subshell": (f"( {R} || rc=$? )\nexit $rc\n", {}, {}, "masked"),
    "rc-in-pipe": (f"{R} || rc=$? | cat\nexit $rc\n", {}, {}, "masked"),
    "bs-exit0": (f"\\exit 0\n{R}\n", {}, {}, "dormant"),
    "split-exit0": (f"ex''it 0\n{R}\n", {}, {}, "dormant"),
    "command-exit0": (f"command exit 0\n{R}\n", {}, {}, "dormant"),
    "shell-bash-n": (f"{R}\n", {"shell": "bash -n {0}"}, {}, "masked"),
    "find-exec-sh-c": (f"find . -maxdepth 0 -exec sh -c '{R}' \\;\n", {}, {}, "masked"),
    "find-exec-bash-ec": (f"find . -maxdepth 0 -exec bash -ec '{R}' \\;\n", {}, {}, "masked"),
    "find-exec-sh-c-plus": (f"find . -maxdepth 0 -exec sh -c '{R}' sh {{}} +\n", {}, {}, "run"),
    "source-return": (f". ci/env.sh\n{R}\n", {}, {"ci/env.sh": "return 0\nexit 0\n"}, "run"),   # a false red before
    "xargs-sh-c": (f"echo r1 | xargs -I{{}} sh -c '{R}'\n", {}, {}, "run"),
    "parallel-bg-wait-all": (f"{R} &\n{R} &\nwait\n", {}, {}, "masked"),
    "eval-in-if": (f"if eval '{R}'; then echo ok; fi\n", {}, {}, "masked"),
    "while-read-heredoc": (f"while read s; do\n  {R}\ndone <<EOF\nr1\nEOF\n", {}, {}, "maybe"),
    "while-read-pipe": (f"echo r1 | while read s; do\n  {R}\ndone\n", {}, {}, "masked"),
    "for-in-file": (f"for s in $(cat list); do {R}; done\n", {}, {"list": "r1\n"}, "maybe"),
    "kill-self-trap": (f"trap 'exit 0' TERM\nkill $$\n{R}\n", {}, {}, "maybe"),
    "kill-self-trap-num": (f"trap 'exit 0' 15\nkill -TERM $$\n{R}\n", {}, {}, "maybe"),
    "set-subst-plus-e": (f"set $(echo +e)\n{R}\necho done\n", {}, {}, "masked"),
    "func-unset-f": (f"python3() {{ :; }}\nunset -f python3\n{R}\n", {}, {}, "run"),   # a false red before
    "set-var-plus-e": (f"OPTS=+e\nset $OPTS\n{R}\necho done\n", {}, {}, "masked"),
    "shopt-u-o-sep": (f"shopt -u -o errexit\n{R}\necho done\n", {}, {}, "masked"),
    "source-procsub": (f". <(echo exit 0)\n{R}\n", {}, {}, "maybe"),
    "cmd-var-set": (f"s=set\n$s +e\n{R}\necho done\n", {}, {}, "masked"),
    "exec-env-true": (f"exec env true\n{R}\n", {}, {}, "dormant"),
    "exit-in-brace-pipe": (f"{{ exit 0; }} | cat\n{R}\n", {}, {}, "run"),
    # `*)` takes every word: the exit is certain
    "case-exit-glob": (f"case $GITHUB_EVENT_NAME in\n  *) exit 0 ;;\nesac\n{R}\n", {}, {}, "dormant"),
    "test-unknown-exit": (f"[ -d /nonexistent ] || exit 0\n{R}\n", {}, {}, "maybe"),
    "for-empty-var": (f"for s in $EMPTY; do {R}; done\n", {}, {}, "dormant"),
    "func-redefined": (f"run() {{ {R}; }}\nrun() {{ :; }}\nrun\n", {}, {}, "dormant"),
    "func-defined-in-func": (f"setup() {{ python3() {{ :; }}; }}\nsetup\n{R}\n", {}, {}, "dormant"),
    "func-defined-source": (f". ci/env.sh\n{R}\n", {}, {"ci/env.sh": "python3() { :; }\n"}, "dormant"),
    "trap-exit-in-bash-c": (f"bash -c \"trap 'exit 0' EXIT; {R}\"\n", {}, {}, "masked"),
    "subshell-trap-exit": (f"( trap 'exit 0' EXIT; {R} )\necho done\n", {}, {}, "masked"),
    "subshell-trap-exit-last": (f"( trap 'exit 0' EXIT; {R} )\n", {}, {}, "masked"),
    "bash-ec-trap-exit": (f"bash -ec \"trap 'exit 0' EXIT; {R}\"\n", {}, {}, "masked"),
    "subshell-trap-cleanup": (f"( trap 'rm -f log' EXIT; {R} )\n", {}, {}, "run"),
    "trap-exit-in-subshell-only": (f"( trap 'exit 0' EXIT )\n{R}\n", {}, {}, "run"),
    "nested-func-or-true": (f"f() {{ g; }}\ng() {{ {R}; echo after; }}\nf || true\n", {}, {}, "masked"),
    "local-shadow-global": (f"rc=1\nf() {{ local rc=0; {R} || rc=$?; }}\nf\nexit $rc\n", {}, {}, "run"),
    "declare-g-rc": (f"f() {{ declare -g rc=0; {R} || rc=$?; }}\nf\nexit $rc\n", {}, {}, "run"),
    "elif-cond": (f"if false; then :\nelif {R}; then echo ok\nfi\n", {}, {}, "masked"),
    "err-trap-in-func-global": (f"f() {{ trap 'exit 0' ERR; }}\nf\n{R}\n", {}, {}, "masked"),
    "err-trap-E-return": (f"set -E\ntrap 'return 0' ERR\nf() {{ {R}; echo after; }}\nf\n", {}, {}, "masked"),
    "or-return-0": (f"f() {{ {R} || return 0; echo x; }}\nf\necho done\n", {}, {}, "masked"),
    "pipefail-in-subshell": (f"(set -o pipefail)\n{R} | tee log\n", {}, {}, "masked"),
    "pipefail-in-pipe-part": (f"set -o pipefail | cat\n{R} | tee log\n", {}, {}, "masked"),
    "set-e-in-and-list-left": (f"set +e\nset -e && true\n{R}\necho done\n", {}, {}, "run"),
    "trap-exit-reset-then-set": (f"trap - EXIT\ntrap 'exit 0' EXIT\n{R}\n", {}, {}, "masked"),
    "exit-trap-false-code": (f"trap 'exit $?' EXIT\n{R}\n", {}, {}, "run"),
    "exit-trap-rc-reset": (f"trap 'rc=$?; rc=0; exit $rc' EXIT\n{R}\n", {}, {}, "masked"),
    "find-exec-plus": (f"find . -maxdepth 0 -exec {R} {{}} +\n", {}, {}, "run"),   # `+` passes the failure on
    # found by the differential fuzzer (registered/test_ci_audit_shell_fuzz.py), minimized: top-level `return`
    # is a failing command; set -e is ignored in all a `||`/`!`/condition holds; a `while` condition that fails
    # leaves status 0; an `else` is not skipped by a `then` that changes nothing; a `bash -c` child has no
    # pipefail unless its options say so; `&` runs in the background; `( (` is two subshells, not `((`; an `if`
    # has the status of its branch's last command
    "return-top-negated": (f"! return 0\n{R}\n", {}, {}, "run"),
    "rc-return-top-negated": (f"{R} || rc=$?\n! return $rc\n", {}, {}, "masked"),
    "false-in-or-group": (f"{{ false; echo; }} || true\n{R}\n", {}, {}, "run"),
    "false-in-negated-loop": (f"! for x in a; do [ ]; done\n{R}\n", {}, {}, "run"),
    "while-runner-exit-status": (f"while {R}; do exit $?; done\ntrue\n", {}, {}, "masked"),
    "bash-ec-while-runner": (f"bash -ec 'while {R}; do exit $?; done; true'\n", {}, {}, "masked"),
    "exit-trap-false-after-if": (f"trap 'exit 0' EXIT\nif false || {R}; then :; fi\nfalse\n", {}, {}, "masked"),
    "then-merged-else-run": (f"if grep -q x list; then echo found; else {R}; fi\n", {}, {"list": "x\n"}, "maybe"),
    "else-exit-after-neg": (f"! {R}\nif grep -q x list; then echo found; else exit 3; fi\n", {}, {"list": "x\n"},
                            "masked"),
    "bash-c-no-pipefail": (f"bash -c '{R} | cat'\n", {"shell": "bash"}, {}, "masked"),
    "bash-eo-pipefail-c": (f"bash -eo pipefail -c '{R} | tee log'\n", {"shell": "bash"}, {}, "run"),
    "false-in-background": (f"false & echo\n{R}\n", {}, {}, "run"),
    "exit-1-in-piped-subshell": (f"( [ -f list ] && exit 1; {R} ) | cat\n", {}, {"list": "x\n"}, "masked"),
    "fail-in-piped-group": (f"{{ grep -q y list; {R}; }} | cat\n", {}, {"list": "x\n"}, "masked"),
    "nested-subshells": (f"( ( case \"$NEVER\" in a) exit 0 ;; esac; {R} ) )\n", {}, {}, "run"),
    "if-status-and": (f"if [ -f list ]; then grep -q y list; fi && {R}\necho done\n", {}, {"list": "x\n"}, "maybe"),
    "nested-subshells-never": (f"( ( case \"$NEVER\" in a) {R} ;; esac ) )\n", {}, {}, "dormant"),
    # a `{ }`, if or case whose status is a failure where `set -e` was ignored does not end the script
    "and-list-in-case-arm": (f"case a in a) if true; then {R}; fi && true;; esac\necho done\n", {}, {}, "masked"),
    "and-list-in-group": (f"{{ {R} && true; }}\necho done\n", {}, {}, "masked"),
    # the failing pass of an inner loop is what the piped subshell's status carries
    "nested-loops-piped": ("i=; while [ \"$i\" != xx ]; do i=${i}x; j=; while [ \"$j\" != xx ]; do j=${j}x; "
                           f"{R}; done; done | cat\n", {}, {}, "masked"),
    # a function the script does not export is not defined in a child shell
    "unexported-function-in-bash-c": (f"f() {{ {R}; }}\nbash -c 'f | cat'\n", {}, {}, "dormant"),
    # with pipefail a pipeline whose part always fails ends the script, and the EXIT trap exits 0
    "pipefail-false-pipe-exit-trap": (f"trap 'exit 0' EXIT\nfalse | cat\n{R}\n", {"shell": "bash"}, {}, "dormant"),
    # a failure handled loudly is a run (each read as masked before: a false red on common shapes);
    # set -e applies to the last command of && / || and to a subshell there
    "or-exit-1": (f"{R} || exit 1\necho done\n", {}, {}, "run"),
    "or-group-exit-1": (f"{R} || {{ echo failed; exit 1; }}\necho done\n", {}, {}, "run"),
    "or-subshell-exit1": (f"{R} || (echo failed; exit 1)\necho done\n", {}, {}, "run"),
    "semicolon-true-under-set-e": (f"{R}; true\n", {}, {}, "run"),
    "exit-0-after-under-set-e": (f"{R}\nexit 0\n", {}, {}, "run"),
    "set-plus-e-runner-last": (f"set +e\necho start\n{R}\n", {}, {}, "run"),
    "or-false": (f"{R} || false\necho done\n", {}, {}, "run"),
    "or-return-1-in-function": (f"f() {{ {R} || return 1; }}\nf\necho done\n", {}, {}, "run"),
    "or-return-in-function": (f"f() {{ {R} || return; }}\nf\necho done\n", {}, {}, "run"),
    "rc-tested-then-exit": (f"set +e\n{R}\nrc=$?\nif [ $rc -ne 0 ]; then exit $rc; fi\necho ok\n", {}, {}, "run"),
    "rc-string-tested": (f"set +e\n{R}\nrc=$?\n[ \"$rc\" = 0 ] || exit 1\necho ok\n", {}, {}, "run"),
    "guard-in-function": (f"check() {{ [ -f list ] || return 1; }}\ncheck\n{R}\n", {}, {"list": "x\n"}, "run"),
    "guard-subshell-exit": (f"[ -f list ] || (echo missing; exit 1)\n{R}\n", {}, {"list": "x\n"}, "run"),
    # ... and not to a `{ }` whose failure came from a command where set -e was ignored
    "group-failure-set-e-ignored": (f"true && {{ false && echo x; }}\n{R}\necho done\n", {}, {}, "run"),
    # a subshell or a last command of && / || that always fails ends the script first (a false run before)
    "subshell-exit-1-before": (f"( exit 1 )\n{R}\n", {}, {}, "dormant"),
    "and-false-before": (f"true && false\n{R}\n", {}, {}, "dormant"),
    "or-false-before": (f"false || false\n{R}\n", {}, {}, "dormant"),
    # exit and return codes are taken modulo 256: `exit 256` is a success (a false run before)
    "or-exit-256": (f"{R} || exit 256\n", {}, {}, "masked"),
    "or-return-256": (f"f() {{ {R} || return 256; }}\nf\necho done\n", {}, {}, "masked"),
    # a reserved word is one only where a command starts: `echo done` does not end the loop (a false run before)
    "done-as-an-argument": (f"while false; do echo done; {R}; done\n", {}, {}, "dormant"),
    "fi-as-an-argument": (f"if false; then echo fi; {R}; fi\n", {}, {}, "dormant"),
    # a case that takes no arm, or an empty one, has status 0 (it kept the status before it: a false run)
    "case-no-arm-after-failure": (f"set +e\n{R}\ncase b in a) true;; esac\n", {}, {}, "masked"),
    "case-empty-arm-after-failure": (f"set +e\n{R}\ncase a in a) ;; esac\n", {}, {}, "masked"),
    # `! return 0` returns 0: the call does not fail the step, so it covers no outcome (a false run)
    "negated-return-covers-nothing": (f"f() {{ ! return 0; }}\nif [ -f list ]; then {R}; fi\nf\n", {}, {}, "maybe"),
    # a syntax error: bash runs the lines before it, then exits 2 through the EXIT trap (a false run before)
    "unclosed-if-exit-trap": (f"trap 'exit 0' EXIT\nif true; then\ntrap - EXIT\n{R}\n", {}, {}, "maybe"),
    "stray-semicolon-exit-trap": (f"trap 'exit 0' EXIT\ntrap - EXIT; {R}; ;\n", {}, {}, "maybe"),
    "empty-case-arm-exit-trap": (f"trap 'exit 0' EXIT\ncase a in a) ; esac\ntrap - EXIT\n{R}\n", {}, {}, "maybe"),
    "stray-fi-exit-trap": (f"trap 'exit 0' EXIT\nfi\ntrap - EXIT\n{R}\n", {}, {}, "maybe"),
    # an if that takes no branch has status 0, whatever its condition returned (it kept the runner's: a false mask)
    "if-no-branch-after-failure": (
        "true && set -e\nfor x in a b; do i1=; while [ \"$i1\" != xx ]; do i1=${i1}x; "
        f"if [ \"$X\" != a ]; then {R}; fi && true; done; if [ \"$X\" = b ]; then true; fi; done\n",
        {"env": {"X": "${{ vars.X }}"}}, {}, "masked"),
    # a subshell that may exit 0 before a command that fails is not a command that always fails (a false run)
    "subshell-exit-0-or-false": (f"( if [ -f list ]; then exit 0; fi; false ) || true\nif [ -f other ]; then {R}; fi\n",
                                 {}, {"list": "x\n"}, "maybe"),
    # each arm of a case, each clause of an if, is its own condition, even where their texts read alike: a later
    # arm that exits 0 is not covered by the first arm and the no-arm path (a false run before)
    "case-later-arm-exits-0": (f"case \"$(cat mode)\" in a) ;; b) exit 0;; esac\n{R}\n", {}, {"mode": "b\n"}, "maybe"),
    "case-default-arm-exits-0": (f"case \"$(cat mode)\" in a) ;; *) exit 0;; esac\n{R}\n", {}, {"mode": "b\n"},
                                 "maybe"),
    "elif-same-test-twice": ("if [ -f flag ] || ! touch flag; then :; "
                             f"elif [ -f flag ] || ! touch flag; then exit 0; fi\n{R}\n", {}, {}, "maybe"),
    # ... and so is each reading of one: a function called twice may take another branch the second time (what
    # it tests may have changed): (then, else) exits 0 here, while (then, then) and (else, else) reach the run
    "function-reads-its-test-twice": ("h() { if [ -f flag ] || ! touch flag; then v=1; else v=2; fi; }\nh\nw=$v\nh\n"
                                      f"[ \"$w\" = \"$v\" ] || exit 0\n{R}\n", {}, {}, "maybe"),
    # `*)` takes every value: a case whose other arm runs the suite too, or fails loudly, proves the run
    "case-default-arm-runs-too": (f"case \"$(cat mode)\" in a) {R};; *) {R};; esac\n", {}, {"mode": "b\n"}, "run"),
    # under `set -e` a command that may fail ends the script through its EXIT or ERR trap, which may exit 0
    # (a false run before); a trap that does not exit leaves that failure loud
    "exit-trap-0-then-may-fail": (f"trap 'exit 0' EXIT\n[ -f flag ]\ntrap - EXIT\n{R}\n", {}, {}, "maybe"),
    # an `exit` in the ERR trap still runs the EXIT trap, whose own `exit` sets the code (fuzz seed 9113)
    "err-trap-exit-1-exit-trap-0": (f"trap 'exit 0' EXIT\ntrap 'exit 1' ERR\n{R}\n", {}, {}, "masked"),
    "err-trap-exit-3-exit-trap-echo": (f"trap 'echo bye' EXIT\ntrap 'exit 3' ERR\n{R}\n", {}, {}, "run"),
    "err-trap-exit-1-exit-trap-0-may-fail": (f"trap 'exit 0' EXIT\ntrap 'exit 1' ERR\n[ -f flag ]\ntrap - EXIT\n{R}\n",
                                             {}, {}, "maybe"),
    # an `if` whose branch ends in a failure returns it; the skipped `if` returns 0 (fuzz seed 9117: the branch
    # merged into the skipping side, read as returning 0 too, so the runner after `&&` was a false run)
    "if-negated-branch-and-runner": (f"if [ -f flag ]; then ! grep -q x flag; fi && {R}\necho done\n",
                                     {}, {"flag": "x\n"}, "maybe"),
    "if-true-branch-and-runner": (f"if [ -f flag ]; then true; fi && {R}\necho done\n", {}, {"flag": "x\n"}, "run"),
    # the EXIT trap runs when the script falls off its end too: a runner there was never read (fuzz seed 9118, a
    # false unmasked); with `set -e` off the trap goes on past its failure and bash exits with the status before it
    "exit-trap-runner-set-plus-e": (f"trap '{R}' EXIT\nset +e\necho done\n", {}, {}, "masked"),
    "exit-trap-runner": (f"trap '{R}' EXIT\necho done\n", {}, {}, "run"),
    # a subshell's own EXIT trap that exits sets its status (fuzz seed 9117: read as 0, so `||` was never taken)
    "subshell-exit-trap-1-or-runner": (f"( trap 'exit 1' EXIT ) || {R}\necho done\n", {}, {}, "maybe"),
    # under pipefail an early part's `exit 3` fails the pipeline, which `set +e` lets go on: that side was dropped as
    # loud, so the runner's failure before it read as failing the step (fuzz seed 9118, a false unmasked)
    "pipefail-part-exits-set-plus-e": (f"set +e\nf() {{ if [ -f flag ]; then {R}; exit 3; fi; }}\nf | cat\necho done\n",
                                       {"shell": "bash"}, {"flag": "x\n"}, "masked"),
    # bash runs the ERR trap on a failure with `set -e` off too (fuzz seed 9124: read as the script's failing end,
    # a false run); a handler that returns leaves `$?` as the failure set it (the control: read as 0 before)
    "err-trap-0-without-set-e": (f"set +e\n{R}\ntrap 'exit 0' ERR\nfalse\n", {}, {}, "masked"),
    "err-trap-echo-without-set-e": (f"set +e\ntrap 'echo failed' ERR\n{R}\n", {}, {}, "run"),
    "err-trap-0-then-may-fail": (f"trap 'exit 0' ERR\n[ -f flag ]\ntrap - ERR\n{R}\n", {}, {}, "maybe"),
    "cleanup-trap-then-may-fail": (f"trap 'rm -f log' EXIT\n[ -f flag ]\n{R}\n", {}, {"flag": "x\n"}, "run"),
    # `( ! f )` alone: bash (5.2) lets `set -e` stop f at the runner's failure and gives the subshell status 0
    # (a false run before: the reader ignored `set -e` under `!`, so f returned 0 and `!` made it a failure)
    "bare-negation-subshell": (f"f() {{ {R}; echo ok; }}\n( ! f )\n", {}, {}, "masked"),
    # ... and what bash reads is not one: a redirection after a compound or alone, a continued pipe, `=~ (a|b)`
    # (set +e: under set -e a command that may fail would end the script through the trap as well)
    "valid-shapes-exit-trap": (f"set +e\ntrap 'exit 0' EXIT\n> log\nfor s in r1; do echo $s; done > list\n"
                               f"[[ r1 =~ ^(r1|r2)$ ]] && echo ok\necho r1 | \\\n  while read s; do echo $s; done\n"
                               f"trap - EXIT\nset -e\n{R}\n", {}, {}, "run"),
}


def build(tmp_path: Path, name: str) -> Path:
    """base/ with its nightly workflow replaced by one schedule-triggered step running the case's script."""
    script, step_keys, files, _verdict = CASES[name]
    root = materialize("base", tmp_path / name)
    step = {"name": "r1 accuracy", "run": script, **{k: v for k, v in step_keys.items() if k != "before"}}
    before = [{"name": "prep", "run": step_keys["before"]}] if "before" in step_keys else []
    doc = {"name": "nightly", "on": {"schedule": [{"cron": "30 2 * * *"}]},
           "jobs": {"r1-mi35x-8": {"runs-on": "linux-mi35x-gpu-8",
                                   "steps": [{"uses": "actions/checkout@v4"}, *before, step]}}}
    (root / ".github/workflows/nightly.yml").write_text(yaml.safe_dump(doc, sort_keys=False, width=10000))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def verdict(root: Path) -> str:
    """run / masked / dormant / maybe for the r1 suite (masked wins: it names the step)."""
    findings = run_foreign_audit(root).findings
    if any(f.rule in ("masked-step", "unresolved-step", "unreadable-input", "unknown-suite") for f in findings):
        return "masked" if any(f.rule == "masked-step" for f in findings) else "other"
    mine = [f for f in findings if (f.hardware, f.suite, f.schedule) == SUITE]
    if not mine:
        return "run"
    [found] = mine
    return {"error": "dormant", "warning": "maybe"}.get(found.severity, found.severity) \
        if found.rule == "dormant-suite" else found.rule


STUB = """#!/bin/bash
case "$1" in *run_suite.py) echo called >> "$RUNNER_MARK"; exit 1;; esac
exec {python} "$@"
"""


def real_shell(root: Path, name: str) -> tuple[int, bool]:
    """(the step's exit status, whether the runner was called) when GitHub's shell runs the script with a
    ``python3`` that fails the runner call."""
    script, step_keys, _files, _verdict = CASES[name]
    stub = root / ".stub"
    stub.mkdir()
    (stub / "python3").write_text(STUB.format(python=shlex.quote(sys.executable)))
    (stub / "python3").chmod(0o755)
    (root / ".step.sh").write_text(script)
    template = GITHUB_SHELLS.get(step_keys.get("shell"), step_keys.get("shell"))
    argv = [w.replace("{0}", str(root / ".step.sh")) for w in shlex.split(template)]
    mark = root / ".runner-called"
    env = {"PATH": f"{stub}:/usr/bin:/bin", "RUNNER_MARK": str(mark), "HOME": str(root),
           **{k: str(v) for k, v in step_keys.get("env", {}).items()}}
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    return proc.returncode, mark.exists()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_shell_case_gets_its_verdict(tmp_path, name):
    assert verdict(build(tmp_path, name)) == CASES[name][3]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("name", sorted(CASES))
def test_where_real_bash_stays_green_the_audit_does_not_say_run(tmp_path, name):
    """bash (and sh, python for their shells) runs each script with a runner that fails: a step that
    still exits 0 skipped the runner or swallowed its failure, and the audit must say so."""
    script, step_keys, _files, expected = CASES[name]
    template = GITHUB_SHELLS.get(step_keys.get("shell"), step_keys.get("shell"))
    if not shutil.which(shlex.split(template)[0]):
        registered_skip("needs-bash")
    root = build(tmp_path, name)
    got = verdict(root)
    status, called = real_shell(root, name)
    if status == 0:
        assert got != "run", f"{name}: bash exits 0 (runner called: {called}), the audit says run"
    if expected == "run":   # the controls: a run the audit proves fails the step when the runner fails
        assert status != 0 and called, (name, status, called)
    if got == "dormant":    # never reached: bash never calls it
        assert not called, name
