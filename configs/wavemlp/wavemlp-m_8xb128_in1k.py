# Wave-MLP-M, paper Table 1/2: 44M params, 7.9G FLOPs, 83.4 top-1 (reported; official README 83.3).
# Same official recipe as wavemlp-t_8xb128_in1k.py.
_base_ = './wavemlp-t_8xb128_in1k.py'

model = dict(backbone=dict(arch='m'), head=dict(in_channels=512))
