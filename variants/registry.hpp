// The variants' implementations, reached through the variant table (variant_row.hpp).
#pragma once

#include "variants/variant_row.hpp"
