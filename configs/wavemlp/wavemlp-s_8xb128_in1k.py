# Wave-MLP-S, paper Table 1/2: 30M params, 4.5G FLOPs, 82.6 top-1 (reported; official README 82.9).
# Same official recipe as wavemlp-t_8xb128_in1k.py.
_base_ = './wavemlp-t_8xb128_in1k.py'

model = dict(backbone=dict(arch='s'), head=dict(in_channels=512))
