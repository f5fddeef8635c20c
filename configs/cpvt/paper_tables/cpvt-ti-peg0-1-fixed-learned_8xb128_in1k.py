# CPVT Table 5 "3 fixed (learned init)": CPVT-Ti, one depthwise 3x3 PEG at position 0 initialised from a
# learned PEG and kept fixed while the rest trains from scratch: 5.68M params, 72.3 top-1 (paper).
# The learned PEG is that of a trained cpvt-ti-peg0-1_8xb128_in1k.py (Table 5's learnable row): train it,
# convert nothing, and point `checkpoint` at its checkpoint (loaded strictly: the PEG's weight and bias
# must both be there). Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(0, ), peg_cfg=dict(
    frozen=True,
    init_cfg=dict(type='Pretrained', checkpoint='checkpoints/cpvt-ti-peg0-1_in1k_mmposmlp.pth',
                  prefix='backbone.pegs.0.'))))
