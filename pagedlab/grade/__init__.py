"""Instructor mode: ``python -m pagedlab.grade SUBMISSION.ipynb [...] --json results.json``.

The learner's exercise cells (those defining ``my_<name>`` or an exercise's class,
:mod:`pagedlab.grade.cells`) run in a fresh interpreter (:mod:`pagedlab.grade.child`) that
holds no expected value and no grader, in a cage (:mod:`pagedlab.grade.jail`, started by
:mod:`pagedlab.grade.cage`: own PID and network namespaces, an unprivileged uid, rlimits) and
watched from inside (:mod:`pagedlab.grade.watch`: an audit hook, a snapshot of the drivers);
this process builds every case (the notebook's fixed cases and held-back ones drawn from a
secret salt), sends only the arguments, and compares the plain values that come back
(:mod:`pagedlab.grade.runner`); :mod:`pagedlab.grade.__main__` is the command line. This
``__init__`` imports nothing: the child imports it too.
"""
