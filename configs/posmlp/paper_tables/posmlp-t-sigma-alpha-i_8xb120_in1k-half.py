# PosMLP Table 6 (Sigma = alpha I, Delta freed; 76.49 top-1): the isotropic QPE. The official code's
# only isotropic form is ``generalized=False`` (our 'gqpe'): score = a (Delta . d) - |d|^2 / 2 with a
# learned scalar a per group, i.e. the width is fixed and a scales the centre (see
# mmposmlp/models/layers/relative_position.py); the paper's text does not define alpha further.
_base_ = ['./posmlp-t_8xb120_in1k-half.py']
model = dict(backbone=dict(gate_type='gqpe'))
