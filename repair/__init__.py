"""repair: test an EN->ZH NMT model with Purity, correct its errors, fine-tune, re-verify."""

import os

__version__ = "0.1.0"

# torch's CPU threads (OpenMP: libgomp here, and MKL's through it) wait for their next parallel region asleep
# rather than spinning, unless the environment already says otherwise (OMP_WAIT_POLICY=ACTIVE to spin). Set before
# torch is imported, which reads it once. On a 2-core machine shared with other work a spinning thread holds a core
# that the thread it waits for needs: the demo's test stage took 24-30 s spinning against 2.5-2.8 s asleep, the
# fine-tune 92-95 s against 50-52 s (docs/performance.md, "The loop at 1x, 3x and 10x").
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
