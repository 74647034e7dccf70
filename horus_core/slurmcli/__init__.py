"""``horus-slurm``: Horus workers as Slurm jobs ("pilots", docs/slurm.md). The commands are run
here (:mod:`.commands`), the adaptive pool's loop is :mod:`.adaptive`, the argument parsing is
:mod:`.main`; what they decide and print comes from the pure :mod:`horus_core.slurm`."""
