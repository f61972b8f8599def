// The mstep C++ API in one include.
#pragma once

#include "mstep/api/Attention.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Creation.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/Losses.h"
#include "mstep/api/NN.h"
#include "mstep/api/Reduction.h"
#include "mstep/api/ShapeOps.h"
#include "mstep/api/Tensor.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/Runtime.h"
