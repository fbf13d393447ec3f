import { Body, Controller, Get, Post, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors } from '../../common/openapi/api-docs';
import { Access } from '../../common/auth/principal';
import { NewRateDto, ResourceList, ResourceView } from './dto/billing.dto';
import { BillingService } from './billing.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

@ApiTags('billing')
@ApiAuthenticated()
@UseInterceptors(ReadRetryInterceptor)
@Controller('api/v1/resources')
@Access('user')
export class ResourcesController {
  constructor(private readonly billing: BillingService) {}

  /** The current rate of every resource. */
  @Get()
  @ApiOkResponse({ type: ResourceList })
  list(): Promise<ResourceList> {
    return this.billing.currentResources();
  }
}

@ApiTags('admin')
@ApiAuthenticated()
@Controller('admin/v1/resources')
@Access('admin')
export class AdminResourcesController {
  constructor(private readonly billing: BillingService) {}

  /** A new version of a rate (or a new resource, with its unit); usage already pinned keeps its old rate. */
  @Post()
  @ApiCreatedResponse({ type: ResourceView })
  @ApiErrors(400, 409, 413)
  add(@Body() body: NewRateDto): Promise<ResourceView> {
    return this.billing.addRateVersion(body);
  }
}
