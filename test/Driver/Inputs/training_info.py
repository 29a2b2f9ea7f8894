#!/usr/bin/env python3
"""Prints what each training library says about itself (ampc.h:
ampc_model_training_info, the learning rate and the scaler state), one line
per library:

    NAME: optimizer O; HYPERPARAMETERS; loss scaling L; lr R; scale S
"""
import os
import sys

from ampc.runtime import Model

for path in sys.argv[1:]:
    with Model(path) as model:
        optimizer, hyperparameters, scaling, _ = model.training_info()
        print("%s: optimizer %s; %s; loss scaling %s; lr %r; scale %r" % (
            os.path.basename(path), optimizer, hyperparameters, scaling,
            model.learning_rate, model.scaler_state()["scale"]))
