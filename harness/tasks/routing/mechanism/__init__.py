"""Routing mechanism: PC-SHO-DLM, Memory Sparse Attention and the precision-guided router.

``model``, ``msa`` and ``precision_router`` keep the public API the research seed
(``precision_router.py``) imports, so the seed runs against them unchanged apart from its imports.
"""
