# DeiT-Ti + IMLP ablation: Table 3 "AGeLU", r = 4: the original MLP with AGeLU (72.1 top-1, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', variant='agelu')))
