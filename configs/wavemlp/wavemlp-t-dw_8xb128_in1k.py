# Wave-MLP-T* (depthwise phase estimation), paper Table 1/2: 15M params, 2.1G FLOPs, 80.1 top-1 (reported).
# Same official recipe as wavemlp-t_8xb128_in1k.py.
_base_ = './wavemlp-t_8xb128_in1k.py'

model = dict(backbone=dict(arch='t-dw'), head=dict(in_channels=512))
