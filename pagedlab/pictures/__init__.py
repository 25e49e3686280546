"""Pictures: state -> matplotlib figure or PNG bytes. They read state and never mutate it.

- :mod:`~pagedlab.pictures.blocks`  the block pool, block tables and logical strips (Figs. 6-7)
- :mod:`~pagedlab.pictures.sharing` shared blocks, ref counts, copy-on-write (Figs. 8-9)
- :mod:`~pagedlab.pictures.trace`   the kernel's online softmax, block by block
- :mod:`~pagedlab.pictures.memory`  memory at scale: reservation, Fig. 2, Fig. 13
"""
