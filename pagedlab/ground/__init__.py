"""The ground floor every layer may import (it imports nothing of pagedlab): ``checks``
(argument checks, the slot formula, ``Refused``), ``paper`` (every number quoted from the
paper), ``vllm_refs`` (every vLLM file and PR the notebooks cite, with its commit).
"""
