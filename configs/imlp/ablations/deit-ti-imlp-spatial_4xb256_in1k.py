# DeiT-Ti + IMLP ablation: Table 2 "w/ spatial": GELU, r = 4, + DW block (5.83M, 1.28G, 72.8, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', variant='spatial')))
