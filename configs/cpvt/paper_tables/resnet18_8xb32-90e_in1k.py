# ResNet-18 on ImageNet-1k: the CNN reference row of CPVT Table 13 (12M params, 69.8 top-1, reported; the
# PVT paper's ResNet-18 reference figure, which is torchvision's released resnet18: 69.758).
# Recipe: mmpretrain's resnet/resnet18_8xb32_in1k.py (He et al. 2016 as torchvision's reference script trains
# it: SGD lr 0.1 at batch 256 = 8 x 32, momentum 0.9, wd 1e-4, RandomResizedCrop 224 + flip, lr / 10 at epochs
# 30 and 60), stopped at torchvision's 90 epochs where mmpretrain's runs 100 (a 4th step at 90).
# Evaluation: torchvision's, as the reported figure was measured: PIL bilinear resize of the short side to
# 256 (antialiased), centre crop 224. mmpretrain's config resizes with cv2 (no antialiasing): up to 21 grey
# levels from torchvision's input on tests/test_eval_pipeline_parity.py's images.
_base_ = ['mmpretrain::resnet/resnet18_8xb32_in1k.py', '../../_base_/runner.py']

train_cfg = dict(max_epochs=90)

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bilinear'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
