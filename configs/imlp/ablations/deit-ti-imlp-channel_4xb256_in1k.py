# DeiT-Ti + IMLP ablation: Table 2 "w/ channel" = AMLP, Eq. 5 (4.89M, 1.08G, 70.5, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', variant='channel')))
