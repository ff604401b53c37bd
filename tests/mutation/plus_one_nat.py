"""Add 1 nat to one term of the engine's bound, in a scratch copy, and see the suite fail.

Usage (from the repository root): ``python tests/mutation/plus_one_nat.py [pytest args]``.
Each mutant below adds exactly one nat to one term of F (one rating, one instance, one
annotator, one category, one of the fused kernel's scalar sums, ...) in a copy of
``ordmix_core`` under a temporary folder, then runs ``tests/vb/test_bound_independent.py`` there
(default: the fit and arbitrary-state checks, stopping at the first failure). A mutant that
passes is printed as SURVIVED and the script exits 1. Not part of CI (one run per mutant).
The edits are plain text replacements: when the engine changes, update the ``old`` strings
(the script says which one no longer matches).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (description, file, old text, new text): each adds 1 nat to one term
MUTANTS = [
    ("numpy: rating term of rating 0 (spam model)", "bound.py",
     "    h_bern = -xlogy(omega, omega) - xlogy(one_m_omega, one_m_omega)\n",
     "    h_bern = -xlogy(omega, omega) - xlogy(one_m_omega, one_m_omega)\n"
     "    h_bern = h_bern + (np.arange(np.size(h_bern)) == 0)\n"),
    ("numpy: rating terms of the no-spam model (rating 0)", "bound.py",
     "        return float(np.sum(truth))\n",
     "        return float(np.sum(truth + (np.arange(np.size(truth)) == 0)))\n"),
    ("both engines: instance term of instance 0", "bound.py",
     "    return float(np.sum(t))\n",
     "    return float(np.sum(t + (np.arange(np.size(t)) == 0)))\n"),
    ("numpy: Gamma term of annotator 0 / category 0", "bound.py",
     "    return float(np.sum(prior + entropy))\n",
     "    return float(np.sum(prior + entropy + (np.arange(np.size(shape)) == 0)))\n"),
    ("numpy: category terms only (scalar +1 on the delta call)", "vb.py",
     "    f += bound.gamma_terms(s.delta_shape, s.delta_rate, p.phi, p.eta)\n",
     "    f += bound.gamma_terms(s.delta_shape, s.delta_rate, p.phi, p.eta) + 1.0\n"),
    ("fused: Gamma term of annotator 0 / category 0", "vb.py",
     "    return float(np.sum(prior + entropy))\n",
     "    return float(np.sum(prior + entropy + (np.arange(np.size(shape)) == 0)))\n"),
    ("fused: category terms (ratings' share)", "vb.py",
     "    f = 0.5 * float(w_cat @ e_logdelta) - 0.5 * float(e_delta @ d_cat)\n",
     "    f = 0.5 * float(w_cat @ e_logdelta) - 0.5 * float(e_delta @ d_cat) + 1.0\n"),
    ("fused: annotator terms", "vb.py",
     "    f += _gamma_terms(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta)\n",
     "    f += _gamma_terms(tau_shape, tau_rate, e_tau, e_logtau, dig_tau, alpha, beta) + 1.0\n"),
    ("fused: block terms (scalar)", "vb.py",
     "    f = sum_ent + xy.inst_terms\n",
     "    f = sum_ent + xy.inst_terms + 1.0\n"),
    ("fused kernel: sum omega H[q(x)] of chunk 0", "kernels.py",
     "    acc_sc[t, 0] = s_h\n",
     "    acc_sc[t, 0] = s_h + (1.0 if t == 0 else 0.0)\n"),
    ("fused kernel: sum (1 - omega) log pi of chunk 0", "kernels.py",
     "    acc_sc[t, 1] = s_pi\n",
     "    acc_sc[t, 1] = s_pi + (1.0 if t == 0 else 0.0)\n"),
    ("fused kernel: sum H_Bernoulli(omega) of chunk 0", "kernels.py",
     "    acc_sc[t, 2] = s_hb\n",
     "    acc_sc[t, 2] = s_hb + (1.0 if t == 0 else 0.0)\n"),
]  # fmt: skip

DEFAULT_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "-k", "fit_reports or arbitrary"]


def main(argv: list[str]) -> int:
    args = argv or DEFAULT_ARGS
    survived = []
    for desc, fname, old, new in MUTANTS:
        with tempfile.TemporaryDirectory(prefix="ordmix-plus1-") as tmp:
            for d in ("ordmix_core", "tests"):
                shutil.copytree(ROOT / d, Path(tmp) / d, ignore=shutil.ignore_patterns(
                    "__pycache__", "*.nbi", "*.nbc"))  # fmt: skip
            shutil.copy(ROOT / "pyproject.toml", tmp)
            path = Path(tmp) / "ordmix_core" / fname
            src = path.read_text()
            if src.count(old) != 1:
                print(f"STALE   {desc}: {fname} no longer has the text to mutate", flush=True)
                survived.append(desc)
                continue
            path.write_text(src.replace(old, new))
            env = dict(os.environ, PYTHONPATH=tmp)
            cmd = [sys.executable, "-m", "pytest", "tests/vb/test_bound_independent.py", *args]
            res = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
            status = "KILLED " if res.returncode == 1 else "SURVIVED" if res.returncode == 0 else (
                f"ERROR({res.returncode})")  # fmt: skip
            print(f"{status} {desc}", flush=True)
            if res.returncode != 1:
                survived.append(desc)
                print(res.stdout[-2000:], res.stderr[-2000:])
    print(f"{len(MUTANTS) - len(survived)}/{len(MUTANTS)} one-nat mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
