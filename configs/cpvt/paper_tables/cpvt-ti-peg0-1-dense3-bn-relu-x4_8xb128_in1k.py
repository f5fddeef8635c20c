# CPVT Table 14 (other forms of PEG, CPVT-Ti with one PEG after encoder 0): 4 x (dense conv 3x3 + BN + ReLU); 72.5 top-1 (paper).
# Recipe: ../cpvt-ti_8xb128_in1k.py.
_base_ = ['./cpvt-ti-peg0-1_8xb128_in1k.py']
model = dict(backbone=dict(peg_cfg=dict(num_layers=4, conv_type='dense', norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU'))))
