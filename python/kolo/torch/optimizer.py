"""kolo.torch.optimizer: ``DistributedOptimizer``, Horovod's wrapper that
averages gradients over the ranks while the backward pass still runs.

``DistributedOptimizer(optimizer, ...)`` returns a new optimizer of a class
derived from the given one's (``isinstance`` still holds; the old object's
state is dropped), over the same param groups. A hook on each parameter's
gradient accumulator counts the backward passes and, at the
``backward_passes_per_step``-th, starts ``allreduce_async_`` of the gradient
(compressed, named after the parameter) — so communication overlaps the rest
of the backward pass. ``step()`` first waits for every gradient
(``synchronize()``); ``synchronize()`` may be called early (gradient
clipping) and then ``step()`` inside ``skip_synchronize()``. With ``groups``
the parameters of a group go as one grouped allreduce once all of them are
ready. Sparse gradients are allgathered (``sparse_allreduce_async``) unless
``sparse_as_dense``.

Hooks exist only on members of the process set and when the job has more
than one rank (or HOROVOD_ELASTIC=1 / KOLO_ELASTIC=1); otherwise step() is
the wrapped optimizer's.

Thread-safety: an optimizer is used by the training thread (and the autograd
engine's, which runs the hooks during backward()).
"""

import os
import warnings
import weakref
from contextlib import contextmanager

import torch

from kolo.common.basics import Adasum, Average, _on_epoch_change, size
from kolo.common.process_sets import global_process_set
from kolo.torch.compression import Compression
from kolo.torch.functions import broadcast_object
from kolo.torch.mpi_ops import (allreduce_async_, grouped_allreduce_async_,
                                synchronize)
from kolo.torch.sparse import sparse_allreduce_async


def _split_list(items, n):
    """`items` in n consecutive parts of near-equal length."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)]
            for i in range(n)]


def _find_duplicates(names):
    seen, dups = set(), set()
    for n in names:
        if n in seen:
            dups.add(n)
        seen.add(n)
    return dups


def _elastic():
    return os.environ.get('HOROVOD_ELASTIC') == '1' or \
        os.environ.get('KOLO_ELASTIC') == '1'


class _DistributedOptimizer(torch.optim.Optimizer):
    # pylint: disable=super-init-not-called,bad-super-call
    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [
                (f'allreduce.noname.{i}.{j}', v)
                for i, group in enumerate(self.param_groups)
                for j, v in enumerate(group['params'])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError('named_parameters should be a sequence of tuples '
                             '(name, parameter), usually produced by '
                             'model.named_parameters().')
        dups = _find_duplicates([k for k, _ in named_parameters])
        if dups:
            raise ValueError('Parameter names in named_parameters must be '
                             'unique. Found duplicates: %s' %
                             ', '.join(sorted(dups)))
        all_ids = {id(v) for group in self.param_groups
                   for v in group['params']}
        named_ids = {id(v) for _, v in named_parameters}
        unnamed = all_ids - named_ids
        if unnamed:
            raise ValueError('named_parameters was specified, but one or more '
                             'model parameters were not named. Python object '
                             'ids: %s' % ', '.join(str(i) for i in unnamed))

        self._parameter_names = {v: k for k, v in sorted(
            named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or
                    (isinstance(groups, int) and groups > 0)):
                raise ValueError('groups should be a non-negative integer or '
                                 'a list of list of torch.Tensor.')
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError(
                                'groups must consist of torch.Tensor.')
                        if id(p) in seen:
                            raise ValueError('A parameter can only appear '
                                             'once in groups.')
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}

        if self.process_set.included() and (size() > 1 or _elastic()):
            self._register_hooks()
        _on_epoch_change(_forget_on_epoch_change(weakref.ref(self)))

    def _epoch_changed(self):
        """An elastic job moved to its next epoch: the allreduces in flight
        ended with the old epoch, so the pending handles and the backward
        pass counts are dropped (the training loop goes on from a commit
        with a fresh backward pass)."""
        self._handles.clear()
        self._allreduce_delay = {p: self.backward_passes_per_step
                                 for p in self._allreduce_delay}
        for group in self._group_counts:
            self._group_counts[group] = 0
        self._synchronized = False

    def set_backward_passes_per_step(self, passes):
        """Changes how many backward passes accumulate before an allreduce
        (and resets the counts)."""
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for group in self.param_groups
                      for p in group['params'] if p.requires_grad]
            # Every rank forms the same groups in the same order: rank 0's.
            names = broadcast_object(
                [self._parameter_names.get(p) for p in p_list], root_rank=0,
                name='optimizer_parameter_order',
                process_set=self.process_set)
            position = {n: i for i, n in enumerate(names)}
            p_list.sort(key=lambda p: position[self._parameter_names.get(p)])
            if isinstance(self._groups, list):
                listed = {id(p) for p in p_list}
                p_groups, grouped = [], set()
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in listed])
                    grouped.update(id(p) for p in p_groups[-1])
                p_groups.extend([p] for p in p_list if id(p) not in grouped)
            else:
                p_groups = _split_list(p_list, self._groups)
            for group in (tuple(g) for g in p_groups if g):
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0

        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    self._requires_update.add(p)
                    p_tmp = p.expand_as(p)
                    grad_acc = p_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Not computed here (a branch this rank did not take), but
            # another rank may have: every rank submits it.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), \
                    None
        compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # The average's 1/size goes to the postscale (kolo and Horovod).
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = allreduce_async_(compressed, name=name, op=self.op,
                                  prescale_factor=prescale,
                                  postscale_factor=postscale,
                                  process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        for p in group:
            if p.grad is None:
                p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(group[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad)
                                 for p in group])
        handle = grouped_allreduce_async_(list(compressed), name=name,
                                          op=self.op,
                                          process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*_):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        'Gradients were computed more than '
                        'backward_passes_per_step times before call to '
                        'step(). Increase backward_passes_per_step to '
                        'accumulate gradients locally.')
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        handle, ctxs = self._grouped_allreduce_grad_async(group)
                        self._handles[group] = (handle, ctxs)
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                    return
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks
        did not fire) and writes the results into the .grad tensors."""
        if not self.process_set.included():
            self._synchronized = True
            return
        done = set()
        for key in self._handles:
            if isinstance(key, tuple):
                done.update(key)
            else:
                done.add(key)
        if self._groups is not None:
            # Groups some of whose members fired: send the whole group.
            for group, count in list(self._group_counts.items()):
                if count and group not in self._handles:
                    self._handles[group] = \
                        self._grouped_allreduce_grad_async(group)
                    done.update(group)
                    for gp in group:
                        self._handles.pop(gp, None)
        for p in sorted(self._requires_update - done,
                        key=lambda q: self._parameter_names.get(q)):
            if self._groups is not None and p in self._p_to_group and \
                    len(self._p_to_group[p]) > 1:
                group = self._p_to_group[p]
                if group not in self._handles:
                    self._handles[group] = \
                        self._grouped_allreduce_grad_async(group)
                continue
            self._handles[p] = self._allreduce_grad_async(p)
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None and not isinstance(key, tuple):
                self._handles[key] = self._allreduce_grad_async(key)

        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):
                outputs = synchronize(handle)
                for gp, output, gctx in zip(key, outputs, ctx):
                    self._allreduce_delay[gp] = self.backward_passes_per_step
                    gp.grad.set_(self._compression.decompress(output, gctx))
                if self._group_counts.get(key):
                    self._group_counts[key] = 0
                continue
            output = handle() if callable(handle) else synchronize(handle)
            self._allreduce_delay[key] = self.backward_passes_per_step
            if self._groups is not None and key in self._p_to_group:
                self._group_counts[self._p_to_group[key]] = 0
            if key.grad.is_sparse:
                aggregated = self._compression.decompress(output, ctx)
                if not aggregated.is_sparse:
                    aggregated = aggregated.to_sparse()
                # Sparse tensors have no set_(): zero and add.
                key.grad.zero_().add_(aggregated)
            else:
                key.grad.set_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (call
        synchronize() yourself before it)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn('optimizer.step() called without '
                              'optimizer.skip_synchronize() context after '
                              'optimizer.synchronize(). This can cause '
                              'training slowdown. You may want to consider '
                              'using optimizer.skip_synchronize() context if '
                              'you use optimizer.synchronize() in your code.')
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after '
                                 'loss.backward() but before optimizer.step() '
                                 'or optimizer.synchronize(). This is '
                                 'prohibited as it can cause a race '
                                 'condition.')
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _forget_on_epoch_change(ref):
    def hook():
        opt = ref()
        if opt is None:
            return False
        opt._epoch_changed()
        return True

    return hook


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (`op`)
    over the ranks of `process_set`.

    Returns a new optimizer of a class derived from the given one's
    (``isinstance`` still holds; the old object's state is dropped), over
    the same param groups. At the ``backward_passes_per_step``-th backward
    pass, a hook on each parameter starts the allreduce of its gradient
    (compressed with `compression`, named after the parameter), so
    communication overlaps the rest of the backward pass. ``step()`` first
    waits for every gradient; call ``synchronize()`` earlier (to clip
    gradients, say) and then ``step()`` inside ``skip_synchronize()``.
    With `groups`, the parameters of a group go as one grouped allreduce
    once all of them are ready. Sparse gradients are allgathered unless
    `sparse_as_dense`. Adasum is not implemented.

    Hooks exist only on members of the process set, and only when the job
    has more than one rank (or is elastic: HOROVOD_ELASTIC=1 or
    KOLO_ELASTIC=1); otherwise step() is the wrapped optimizer's."""
    # pylint: disable=invalid-name
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with '
                         'op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` '
                      'and will be removed in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError('backward_passes_per_step must be > 0')
    if op == Adasum and size() > 1:
        raise NotImplementedError(
            'kolo.torch: Adasum is not implemented (Horovod has no working '
            'Adasum path without MPI/NCCL either); use op=hvd.Average')
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor,
               groups, sparse_as_dense, process_set)
