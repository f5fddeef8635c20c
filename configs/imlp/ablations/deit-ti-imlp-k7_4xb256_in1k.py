# DeiT-Ti + IMLP ablation: Table 5, n = 7 (5.37M, 1.17G, 72.9, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', kernel_size=7)))
