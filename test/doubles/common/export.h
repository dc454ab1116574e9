// What a double exports: the vendor's C entry points alone (every double is built with hidden visibility
// and keeps the project's floors private, so two doubles and the addon in one process never clash).
#pragma once

#define SPMD_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))
