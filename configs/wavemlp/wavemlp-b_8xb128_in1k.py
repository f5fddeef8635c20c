# Wave-MLP-B, paper Table 2: 63M params, 10.2G FLOPs, 83.6 top-1 (reported; no official weights).
# Same official recipe as wavemlp-t_8xb128_in1k.py.
# no official weights exist for B (Efficient-AI-Backbones issue #93).
_base_ = './wavemlp-t_8xb128_in1k.py'

model = dict(backbone=dict(arch='b'), head=dict(in_channels=768))

# official evaluation of B: crop_pct 0.875 -> short side 256, crop 224
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
