# DeiT-Ti + IMLP ablation: Table 3 "GeLU+concat", r = 2 (72.3 top-1, reported).
# Same as ../deit-ti-imlp_4xb256_in1k.py except the IMLP settings.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', variant='gelu_concat')))
