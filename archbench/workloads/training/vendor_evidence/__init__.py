"""Which vendor library really ran: evidence from oneDNN's verbose mode, not a label.

A system file *declares* its vendor library (``vendor_library``); what executed is found
by a probe, one training step with oneDNN's verbose mode on, and kept in the record field
``vendor_evidence``: ``library`` (onednn | onednn+acl | armpl | none), oneDNN ``version``
and ``isa``, ``implementations`` (name -> calls, ms, share of the probe step's oneDNN
time), ``optimized_share``, ``reference_share`` (implementations named ``ref``, e.g.
``gemm:ref``, ``ref:any``), ``gemm_api_share``, ``loaded_libraries`` (math runtimes
mapped into the probe process) and what precision the computing primitives ran in. Its
modules: :mod:`.onednn_verbose` reads the verbose log into that evidence,
:mod:`.precision` names the precision that executed against the one a run asked for,
:mod:`.library` judges the library that ran against the declared one, :mod:`.probing`
runs the probe (its child process is :mod:`archbench.workloads.training.vendor_probe_child`)
and :mod:`.reuse` lets a run state another record's evidence instead of probing.
"""
