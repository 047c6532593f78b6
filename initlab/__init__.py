"""initlab: explain, verify and fix two initialization-time failures of transformer training.

Subpackages (folders at the repository's top level, mapped by setuptools):

* ``initlab.theory``    -- exact statements and checks (attention-gradient blindness, MLM-head score scale)
* ``initlab.synthetic`` -- laptop-sized experiments (length-100 SPT tasks, synthetic SPLADE)
* ``initlab.realdata``  -- full-scale GPU pipelines (SPLADE on MS MARCO/BEIR, Long Range Arena)
* ``initlab.paper_figs`` -- figure scripts that only read saved results
"""

__version__ = "0.1.0"
