# DeiT-Ti + IMLP ablation: Table 5, n = 5 (5.15M, 1.13G, 72.8, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', kernel_size=5)))
