# LVT-R3: IMLP paper Table 1, "Portable ViT" row LVT-R3 (5.52M params, 0.92G FLOPs, 74.6 top-1,
# reported): LVT with R = 3 RASA recursions; model and recipe otherwise those of lvt-r2_8xb128_in1k.py (the
# official LVT configuration, R = 2), whose header states the recipe and what is not reproduced.
_base_ = './lvt-r2_8xb128_in1k.py'

model = dict(backbone=dict(rasa_recursions=3))
