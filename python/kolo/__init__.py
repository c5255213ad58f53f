"""kolo: Horovod-style collectives for Python.

``import kolo.torch as hvd`` is the drop-in for ``horovod.torch``; this
package itself offers the start/stop/topology calls and the collectives on
NumPy arrays (kolo.numpy), for scripts without torch:

    import kolo, numpy as np
    kolo.init()
    total = kolo.allreduce(np.ones(4, np.float32), op=kolo.Sum)

Launch with ``kolorun -np N /usr/bin/python3 script.py``.
"""

from kolo._version import __version__  # noqa: F401
from kolo.common.basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, ccl_built, cross_rank,
    cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
    is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from kolo.common.exceptions import (  # noqa: F401
    HorovodInternalError, HostsUpdatedInterrupt)
from kolo.common.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)

try:
    from kolo.numpy import (  # noqa: F401
        allgather, allgather_async, allreduce, allreduce_, allreduce_async,
        allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
        broadcast_, broadcast_async, grouped_allreduce, join, poll,
        reducescatter, reducescatter_async, synchronize)
except ImportError:  # no NumPy: start/stop/topology only
    pass
