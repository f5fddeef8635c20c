# CPVT Table 14 (other forms of PEG, CPVT-Ti with one PEG after encoder 0): 1 dense conv 3x3; 72.3 top-1 (paper).
# Recipe: ../cpvt-ti_8xb128_in1k.py.
_base_ = ['./cpvt-ti-peg0-1_8xb128_in1k.py']
model = dict(backbone=dict(peg_cfg=dict(conv_type='dense')))
